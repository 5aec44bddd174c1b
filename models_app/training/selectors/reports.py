"""A version's test suite and a run's reports, shaped for the pages: the gate's rows with their
paired numbers and reasons, the flip report's sections."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from models_app.models import ModelVersion, TrainingRun
from models_app.siamese.evaluation import SUITE_SETS

PRIMARY_METRIC = "mean_accuracy"


GATE_METRIC_LABELS = {
    "typos": "Typos",
    "composition": "Composition",
    "extra_words": "Extra words",
    "verdicts": "Held-out verdicts",
    "p_at_1": "P@1",
    "p_at_10": "P@10",
    "mrr": "MRR",
    "held_out_feedback": "New verdicts held out",
}


# What each gate row means for a curator: whether their verdicts can move it, or whether a
# drop is a cost of the fine-tune that no verdict will win back.
GATE_METRIC_MEANINGS = {
    "typos": "Generated from the taxonomy's own titles with typing errors; no verdict moves "
    "it: a drop is what the fine-tune costs clean titles mistyped.",
    "composition": "Generated from the taxonomy's own titles with a synonym swapped in; no "
    "verdict moves it: a drop is a cost of the fine-tune, not something to correct.",
    "extra_words": "Generated from the taxonomy's own titles with job-ad words around them; no "
    "verdict moves it: a drop is a cost of the fine-tune, not something to correct.",
    "verdicts": "Curators' own verdicts held out of training: a drop loses answers curators "
    "gave; more verdicts in the groups it gets wrong teach them back.",
    "held_out_feedback": "The newest verdicts, held out of the candidate's training: whether "
    "it learnt what curators said since the live model from the other verdicts.",
}
# The held-out row as the gate now measures it: what curators would see, not the models alone.
HELD_OUT_SERVED_MEANING = (
    "The newest verdicts, held out of the candidate's training and answered as curators would "
    "see them: each model with a ranker fitted for it on the other verdicts. Whether it learnt "
    "what curators said since the live model from the other verdicts."
)


def gate_row_meaning(metric: dict) -> str:
    if metric.get("name") == "held_out_feedback" and metric.get("answered") == "served":
        return HELD_OUT_SERVED_MEANING
    return GATE_METRIC_MEANINGS.get(metric.get("name", ""), "")


@dataclass(frozen=True)
class SuiteRow:
    name: str
    accuracy: float | None
    p_at_10: float | None
    mrr: float | None
    cases: int | None


def suite_rows(version: ModelVersion) -> list[SuiteRow]:
    """The stored frozen-suite metrics (``metrics["suite"]``) as one row per test set."""
    suite = (version.metrics or {}).get("suite") or {}
    rows = []
    for name in SUITE_SETS:
        if f"{name}/accuracy" not in suite:
            continue
        cases = suite.get(f"{name}/n")
        rows.append(
            SuiteRow(
                name=GATE_METRIC_LABELS[name],
                accuracy=suite.get(f"{name}/accuracy"),
                p_at_10=suite.get(f"{name}/p@10"),
                mrr=suite.get(f"{name}/mrr"),
                cases=int(cases) if cases is not None else None,
            )
        )
    return rows


def suite_primary(version: ModelVersion) -> float | None:
    return ((version.metrics or {}).get("suite") or {}).get(PRIMARY_METRIC)


def suite_key_metrics(version: ModelVersion) -> dict[str, float | None]:
    """Accuracy per test set, keyed by set name, for the versions table."""
    suite = (version.metrics or {}).get("suite") or {}
    return {name: suite.get(f"{name}/accuracy") for name in SUITE_SETS}


@dataclass(frozen=True)
class GateRow:
    name: str
    suite: str
    live: float | None
    candidate: float | None
    delta: float | None
    passed: bool
    cases: int | None = None  # how many cases the row was measured on, where it says
    against: str | None = None  # a drift row: the reference version it compares with, not live
    ci95: tuple[float, float] | None = None  # the difference's 95% interval
    lost: int | None = None  # cases the baseline got right and the candidate not
    gained: int | None = None
    p_worse: float | None = None  # the paired test's one-sided p that the candidate is worse
    why: str = ""
    meaning: str = ""  # what the row means for a curator (gate_row_meaning)
    # A served held-out row's shares by the models alone (live, candidate): reported, not tested.
    model_alone: tuple[float, float] | None = None

    @property
    def ci_text(self) -> str:
        if self.ci95 is None:
            return ""
        return f"[{_signed(self.ci95[0])}, {_signed(self.ci95[1])}]"

    @property
    def delta_text(self) -> str:
        return "" if self.delta is None else _signed(self.delta)

    @property
    def sentence(self) -> str:
        """The row in plain words: how many right now and before, how often chance alone
        drops that much, and whether it blocks."""
        if self.live is None or self.candidate is None:
            return f"{self.name}: not measured."
        before = f"with {self.against}" if self.against else "before"
        if self.cases and self.lost is not None:
            now, was = round(self.candidate * self.cases), round(self.live * self.cases)
            level = f"{now:,} of {self.cases:,} right against {was:,} of {self.cases:,} {before}"
        else:
            level = f"{self.candidate:.3f} against {self.live:.3f} {before}"
        if self.candidate >= self.live:
            chance = "no drop"
        elif self.p_worse is None:
            chance = "a drop"
        elif self.p_worse < 0.001:
            chance = "a drop this size happens by chance less than 1 time in 1,000"
        else:
            chance = f"a drop this size happens by chance 1 time in {round(1 / self.p_worse):,}"
        alone = (
            f" By the models alone: {self.model_alone[1]:.3f} against {self.model_alone[0]:.3f}"
            " (not tested)."
            if self.model_alone
            else ""
        )
        blocking = "not blocking" if self.passed else "blocking"
        return f"{self.name}: {level}; {chance}: {blocking}.{alone}"


@dataclass(frozen=True)
class GateReport:
    decision: str
    reasons: list[str]
    alpha: float | None
    alpha_per_test: float | None
    rows: list[GateRow]
    verdicts: dict[str, Any] | None
    new_verdicts: int | None
    forced_by: str | None
    reference: str | None = None  # the version drift rows compare with
    stage_seconds: dict[str, float] = field(default_factory=dict)
    # Unjudged answers the candidate moves away from the live ranker's confident ones
    # (gate.Comparison.answers_moved); None in reports from before the gate weighed them.
    answers_moved: dict[str, Any] | None = None


# A fine-tune's stages in the order they run (the database's JSON keeps no order of keys).
RUN_STAGE_ORDER = ("learn", "held_out", "catch_up", "index", "gate", "flips", "repredict")


def _in_run_order(seconds: dict[str, float]) -> dict[str, float]:
    position = {stage: i for i, stage in enumerate(RUN_STAGE_ORDER)}
    return dict(sorted(seconds.items(), key=lambda item: position.get(item[0], len(position))))


def gate_report_of(run: TrainingRun) -> GateReport | None:
    """The gate's decision on a fine-tune's candidate, as the page shows it; None before it."""
    report = run.gate_report or {}
    if not report:
        return None
    rows = [
        GateRow(
            name=GATE_METRIC_LABELS.get(metric.get("name", ""), metric.get("name", "")),
            suite=metric.get("suite", ""),
            # A drift row's baseline is the reference version's score.
            live=metric.get("live", metric.get("reference")),
            candidate=metric.get("candidate"),
            delta=metric.get("delta"),
            passed=bool(metric.get("passed")),
            cases=metric.get("n"),
            against=metric.get("against"),
            ci95=tuple(metric["ci95"]) if metric.get("ci95") else None,
            lost=metric.get("lost"),
            gained=metric.get("gained"),
            p_worse=metric.get("p_worse"),
            why=metric.get("why", ""),
            meaning=gate_row_meaning(metric),
            model_alone=(
                (metric["model_alone"]["live"], metric["model_alone"]["candidate"])
                if metric.get("model_alone")
                else None
            ),
        )
        for metric in report.get("metrics", [])
    ]
    return GateReport(
        decision=report.get("decision", ""),
        reasons=list(report.get("reasons", [])),
        alpha=report.get("alpha"),
        alpha_per_test=report.get("alpha_per_test"),
        rows=rows,
        verdicts=report.get("verdicts") or None,
        new_verdicts=report.get("new_verdicts"),
        forced_by=report.get("forced_by"),
        reference=report.get("reference_version"),
        stage_seconds=_in_run_order(report.get("stage_seconds") or {}),
        answers_moved=report.get("answers_moved"),
    )


@dataclass(frozen=True)
class FlipSection:
    key: str
    title: str
    explanation: str
    count: int
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def more(self) -> int:
        """Rows the report counted but did not keep (each list is capped)."""
        return max(self.count - len(self.rows), 0)


@dataclass(frozen=True)
class FlipReport:
    compared: int
    confirmed_now_wrong: int
    sections: list[FlipSection]
    pending: bool = False  # a forced promotion's report, still being made by a worker


FLIP_SECTIONS = (
    ("broken", "Broken", "The old model had these right; the new one gets them wrong."),
    ("fixed", "Fixed", "The old model had these wrong; the new one gets them right."),
    ("changed", "Changed", "The top group changed, with no curator verdict to say which is right."),
)


def flip_report_of(run: TrainingRun) -> FlipReport | None:
    """What the promotion changed. Broken rows a curator had confirmed come first: they are a
    regression a person already caught once."""
    report = run.flip_report or {}
    if not report:
        return None
    if report.get("pending"):
        return FlipReport(compared=0, confirmed_now_wrong=0, sections=[], pending=True)
    counts = report.get("counts", {})
    sections = []
    for key, title, explanation in FLIP_SECTIONS:
        rows = list(report.get(key, []))
        if key == "broken":
            rows.sort(key=lambda row: not row.get("confirmed"))  # stable: keeps their order
        sections.append(
            FlipSection(
                key=key,
                title=title,
                explanation=explanation,
                count=int(counts.get(key, len(rows))),
                rows=rows,
            )
        )
    return FlipReport(
        compared=int(report.get("compared", 0)),
        confirmed_now_wrong=int(counts.get("confirmed_now_wrong", 0)),
        sections=sections,
    )


def _signed(value: float) -> str:
    """``value`` to three places with its sign; a value that rounds to zero reads +0.000, not
    -0.000 (a JSON column that keeps -0.0 would show it)."""
    return f"{round(value, 3) + 0.0:+.3f}"
