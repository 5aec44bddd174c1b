"""A run's time left over every stage still to come, not only the one it is in: a fine-tune's
training says how long training has left, and the candidate's encoding, index and gate follow.

Each phase of a run has the seconds it is expected to take, worked out from rates measured on
this machine at the run's start (``encode_rates``: the live model encoding and answering a sample
of the taxonomy's own texts) times the work the phase has (texts to encode, queries to answer),
and a training phase from the steps it has done so far. The run reports, at every step, the
phase's own time left (its reported one, else from its pace) plus the expected seconds of every
phase after it.

Every run kind keeps one: a fine-tune's (``retraining._finetune_clock``: learn, held-out check,
catch-up, index, gate, promotion), a build's (``runs.build_clock``: teacher, train, encode, index,
evaluate) and a reindex's or rollback's (``index_clock``: encode, index).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from annotations.models import Member, Taxonomy
from models_app.models import ModelVersion, TrainingRun
from models_app.serving.engines import encoder_for
from models_app.siamese.index import MemberIndex
from models_app.siamese.progress import Progress
from models_app.siamese.search import MemberSearch, SearchConfig
from models_app.siamese.specs import parse_search_config
from models_app.training.services.indexes import index_work

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


def rate_sample(texts: Sequence[str], size: int = RATE_SAMPLE) -> list[str]:
    """Up to ``size`` of ``texts``, spread over all of them (a taxonomy lists its groups in
    order, and their titles differ in length)."""
    return list(texts[:: max(1, len(texts) // max(size, 1))][:size])


# Members an index is timed on at a run's start: a tenth of a second's work.
INDEX_SAMPLE = 2048
# Texts to encode below which a reindex or rollback does not time its encoder.
ENCODE_TIMED_FROM = 8


@dataclass(frozen=True)
class IndexRates:
    """Seconds, as measured: an index's own work a member (the vector index and its search
    tables written to disk), and an exact search's a query and member searched."""

    build: float
    search: float


def index_rates(texts: Sequence[str], dim: int, search: SearchConfig) -> IndexRates:
    """Time an index of ``dim``-dimensional vectors over ``texts`` (at most ``INDEX_SAMPLE`` of
    them) built and written with the tables ``search`` keeps, as ``index_build_create`` does,
    then searched for a tenth of its members. The vectors are random: building and searching
    cost the same whatever they hold."""
    sample = list(texts[:INDEX_SAMPLE]) or ["a"]
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((len(sample), dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with tempfile.TemporaryDirectory(prefix="siamweb-index-rate-") as folder:
        started = time.perf_counter()
        index = MemberIndex.build(vectors, np.arange(1, len(sample) + 1))
        index.save(Path(folder))
        MemberSearch(index, sample, search, tables=Path(folder))
        build = (time.perf_counter() - started) / len(sample)
    queries = vectors[: max(1, len(sample) // 10)]
    started = time.perf_counter()
    index.search(queries, min(len(sample), 80))
    searched = (time.perf_counter() - started) / (len(queries) * len(sample))
    return IndexRates(build=build, search=searched)


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
        # Per phase, the fraction its first report gave: a pace is measured from there.
        self._first_fraction: dict[str, float] = {}

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
            "expected_seconds": {name: round(self.counted(name), 6) for name in self.expected},
        }

    def took_report(self) -> dict[str, Any]:
        """``report`` with the seconds each phase took, for a run that keeps both together
        (``TrainingRun.eta_report``: the next run's ``last_factors`` read them)."""
        took = {name: round(seconds, 3) for name, seconds in self.took.items()}
        return {**self.report(), "took_seconds": took}

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
        fraction done since its first report in the time so far), else what was expected of it
        less the time so far."""
        self._started.setdefault(name, time.monotonic())

        def reported(stage: str, fraction: float, eta: float | None = None) -> None:
            elapsed = time.monotonic() - self._started[name]
            # A stage may start part way (an index's "index" at 0.5, the gate's "evaluate" at
            # 0.5): its pace counts from there, not from 0, or it would say it is nearly done.
            paced = fraction - self._first_fraction.setdefault(name, fraction)
            if eta is not None:
                left = eta
                self._said[name] = elapsed + eta
            elif name not in self._said and paced >= 0.05 and fraction < 1.0:
                left = elapsed / paced * (1.0 - fraction)
            else:
                # A stage that said its time before (training, between its evaluations) keeps
                # to it: an evaluation's fraction counts steps, not the time budget.
                left = max(self.expected_of(name) - elapsed, 0.0)
            self._progress(stage, fraction, left + self.after(name))

        return reported

    def stages(self, phase_of: dict[str, str]) -> Progress:
        """One progress callback for work that reports several stages, each the stage of a
        phase (an index build's ``encode`` then ``index``): a report goes to its stage's phase,
        or to the phase reported last for a stage not named. Phases only move forward: when one
        reports first, every phase before it is done."""
        order = list(self.expected)
        current: list[str] = []  # the phase reported last, once there is one
        callbacks: dict[str, Progress] = {}

        def reported(stage: str, fraction: float, eta: float | None = None) -> None:
            name = phase_of.get(stage) or (current[0] if current else next(iter(phase_of.values())))
            if current and order.index(name) < order.index(current[0]):
                name = current[0]
            if name not in callbacks:
                for earlier in order[: order.index(name)]:
                    if earlier not in self.took:
                        self.done(earlier)
                callbacks[name] = self.phase(name)
            current[:] = [name]
            callbacks[name](stage, fraction, eta)

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


def last_factors(*, kind: str, config: dict[str, Any]) -> dict[str, float]:
    """``calibration`` of the last finished run of ``kind`` with the same spec (any taxonomy's:
    a factor is how much longer than counted a phase took on this machine, not a taxonomy's
    own); none before the first."""
    last = (
        TrainingRun.objects.filter(kind=kind, status=TrainingRun.Status.SUCCEEDED, config=config)
        .exclude(eta_report={})
        .order_by("-finished_at", "-id")
        .values_list("eta_report", flat=True)
        .first()
    ) or {}
    return calibration(last, last.get("took_seconds") or {})


def index_clock(*, run: TrainingRun, model_version: ModelVersion, progress: Progress) -> RunClock:
    """A reindex's or rollback's phases: ``encode``, the members ``index_build_create`` encodes
    (those the live index of ``model_version`` lacks, or all), and ``index``, the index and its
    search tables over every member plus the group descriptions not encoded yet; from the
    version's encoding rate and an index's rates measured now, each times the factor the last
    run of the kind set (``last_factors``)."""
    taxonomy = model_version.taxonomy
    work = index_work(taxonomy=taxonomy, model_version=model_version)
    texts = member_texts(taxonomy)
    encoder = encoder_for(model_version)
    # Timed on no more texts than there are to encode: the scheduled reindex after a round of
    # verdicts encodes a few new members, and fewer than ENCODE_TIMED_FROM are counted as no
    # time (timing the encoder would take longer than encoding them).
    encoded = work.encoded + work.descriptions
    encode = 0.0
    if encoded >= ENCODE_TIMED_FROM:
        encode = encode_rates(encoder, None, rate_sample(texts, min(RATE_SAMPLE, encoded))).encode
    config = parse_search_config(model_version.config)
    built = index_rates(rate_sample(texts, INDEX_SAMPLE), encoder.dim, config)
    return RunClock(
        progress,
        {
            "encode": work.encoded * encode,
            "index": work.members * built.build + work.descriptions * encode,
        },
        rates={"encode_seconds_per_text": encode, "index_seconds_per_member": built.build},
        factors=last_factors(kind=run.kind, config=run.config),
    )


def member_texts(taxonomy: Taxonomy) -> list[str]:
    return list(
        Member.objects.filter(taxonomy=taxonomy).order_by("id").values_list("text", flat=True)
    )
