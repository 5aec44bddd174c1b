"""A run's time left over every stage still to come, not only the one it is in: a fine-tune's
training says how long training has left, and the candidate's encoding, index and gate follow.

Each phase of a run has the seconds it is expected to take, worked out from rates measured on
this machine at the run's start (``encode_rates``: the live model encoding and answering a sample
of the taxonomy's own texts) times the work the phase has (texts to encode, queries to answer),
and a training phase from the steps it has done so far. The run reports, at every step, the
phase's own time left (its reported one, else from its pace) plus the expected seconds of every
phase after it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from models_app.siamese.progress import Progress

# Texts timed at a run's start: enough for a stable rate, a second or so with a tower on a CPU.
RATE_SAMPLE = 256


@dataclass(frozen=True)
class EncodeRates:
    """Seconds a text, as measured: encoding one, and answering one (encoded and searched)."""

    encode: float
    answer: float


def encode_rates(encoder, engine, texts: Sequence[str]) -> EncodeRates:
    """Time ``encoder`` over up to ``RATE_SAMPLE`` of ``texts`` and the live ``engine`` answering
    them; a tenth of the sample answered first, so no first call's loading is counted."""
    sample = list(texts[:RATE_SAMPLE]) or ["a"]
    encoder.encode(sample[:8])
    started = time.perf_counter()
    encoder.encode(sample)
    encode = (time.perf_counter() - started) / len(sample)
    answer = encode
    if engine is not None:
        engine.nearest_members(sample[: max(1, len(sample) // 10)], 10)
        started = time.perf_counter()
        engine.nearest_members(sample, 10)
        answer = (time.perf_counter() - started) / len(sample)
    return EncodeRates(encode=encode, answer=answer)


class RunClock:
    """The progress of a run of named phases (in order), each reporting as a stage does; every
    report goes on to ``progress`` with the run's time left.

    ``phases``: the seconds each is expected to take. ``like``: phases expected to take a share
    of another's time (a fine-tune's catch-up trains as its first phase does, on a quarter of
    its budget), worked out from that phase's time as it becomes known. ``rates``: what the
    expectations came from, kept for the run's report. ``factors``: per phase, how much longer
    than expected it took in the last run of its kind (``calibration``): a stage does more than
    the work counted (an index writes its search tables, the gate builds its test suite), and
    the last run measured how much more."""

    def __init__(
        self,
        progress: Progress,
        phases: dict[str, float],
        like: dict[str, tuple[str, float]] | None = None,
        rates: dict[str, float] | None = None,
        factors: dict[str, float] | None = None,
    ) -> None:
        self._progress = progress
        self.expected = dict(phases)  # seconds, per phase, in the run's order, before factors
        self.rates = dict(rates or {})
        self.factors = {name: factor for name, factor in (factors or {}).items() if name in phases}
        self.like = dict(like or {})
        self.took: dict[str, float] = {}
        self._started: dict[str, float] = {}
        # Per phase whose stage said its own time left: the time it said it takes in all.
        self._said: dict[str, float] = {}

    def expected_of(self, phase: str) -> float:
        """Seconds ``phase`` is expected to take in all: none once done; what its stage said
        while it runs; else its counted work, times its factor."""
        if phase in self.took:
            return 0.0
        if phase in self._said:
            return self._said[phase]
        return self.counted(phase) * self.factors.get(phase, 1.0)

    def counted(self, phase: str) -> float:
        """Seconds the work counted for ``phase`` comes to, before any factor (a phase like
        another: that one's time as known, its own stage's word or its count, times the share)."""
        if phase in self.like:
            source, share = self.like[phase]
            known = self.took.get(source, self._said.get(source, self.expected[source]))
            return known * share
        return self.expected[phase]

    def report(self) -> dict[str, dict[str, float]]:
        """For the run's report: the rates, the factors, and per phase the seconds its counted
        work came to (the next run's ``calibration`` sets them beside what each took)."""
        return {
            "rates": self.rates,
            "factors": {name: round(f, 3) for name, f in self.factors.items()},
            "expected_seconds": {name: round(self.counted(name), 3) for name in self.expected},
        }

    def after(self, phase: str) -> float:
        """Seconds expected of the phases after ``phase``."""
        names = list(self.expected)
        return sum(self.expected_of(name) for name in names[names.index(phase) + 1 :])

    def left(self) -> float:
        """Seconds expected of every phase not done."""
        return sum(self.expected_of(name) for name in self.expected)

    def done(self, phase: str) -> None:
        """``phase`` ended: what it took replaces what it was expected to."""
        self._started.setdefault(phase, time.monotonic())
        self.took[phase] = time.monotonic() - self._started[phase]

    def phase(self, name: str) -> Progress:
        """The progress callback of phase ``name``: its stage's own time left when it says
        (which also sets what the phase is expected to take in all), else from its pace (the
        fraction done in the time so far), else what was expected of it less the time so far."""
        self._started.setdefault(name, time.monotonic())

        def reported(stage: str, fraction: float, eta: float | None = None) -> None:
            elapsed = time.monotonic() - self._started[name]
            if eta is not None:
                left = eta
                self._said[name] = elapsed + eta
            elif name not in self._said and 0.05 <= fraction < 1.0:
                left = elapsed / fraction * (1.0 - fraction)
            else:
                # A stage that said its time before (training, between its evaluations) keeps
                # to it: an evaluation's fraction counts steps, not the time budget.
                left = max(self.expected_of(name) - elapsed, 0.0)
            self._progress(stage, fraction, left + self.after(name))

        return reported


# A factor outside these is a run that went wrong (a machine that slept, a retry), not a pace.
FACTOR_RANGE = (0.5, 20.0)


def calibration(report: dict, took: dict[str, float]) -> dict[str, float]:
    """Per phase of a finished run, the seconds it took over the seconds its counted work came
    to (``RunClock.report``'s ``expected_seconds``), where it took long enough to say."""
    expected = (report or {}).get("expected_seconds") or {}
    factors = {}
    for phase, counted in expected.items():
        if counted > 0 and took.get(phase, 0.0) >= 0.05:
            factors[phase] = min(max(took[phase] / counted, FACTOR_RANGE[0]), FACTOR_RANGE[1])
    return factors
