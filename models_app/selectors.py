"""Reads for the Models pages: the live version, every version, the runs and their reports.

Everything here is bounded by what a taxonomy has few of (versions, runs): one query each, with
the rows they show joined in, so a page costs the same however many inputs and verdicts exist.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet

from annotations.models import Taxonomy
from models_app.charts import Chart, Series
from models_app.models import Deployment, ModelVersion, TrainingRun

RECENT_RUNS = 20
VERSIONS_PER_PAGE = 50
# The frozen suite's sets in the paper's order; a set the taxonomy has no case for is left out.
SUITE_SETS = ("typos", "composition", "extra_words", "annotations")
PRIMARY_METRIC = "mean_accuracy"
GATE_METRIC_LABELS = {
    "typos": "Typos",
    "composition": "Composition",
    "extra_words": "Extra words",
    "annotations": "Annotations",
    "p_at_1": "P@1",
    "p_at_10": "P@10",
    "mrr": "MRR",
    "held_out_feedback": "Held-out feedback",
}


def taxonomies_for_models() -> list[Taxonomy]:
    """Every taxonomy, by slug: the page's switcher (there are a handful)."""
    return list(Taxonomy.objects.order_by("slug").only("id", "slug", "name"))


def live_version_get(*, taxonomy: Taxonomy) -> ModelVersion | None:
    deployment = (
        Deployment.objects.filter(taxonomy=taxonomy)
        .select_related("index_build__model_version__parent__taxonomy")
        .first()
    )
    if deployment is None:
        return None
    version = deployment.index_build.model_version
    version.taxonomy = taxonomy  # for its label, without another query
    return version


@dataclass(frozen=True)
class VersionRow:
    version: ModelVersion
    is_live: bool
    primary: float | None
    accuracy: dict[str, float | None]
    # False for a candidate that never went live (the gate rejected it, or its run failed or
    # is still going): there is nothing to roll back *to*.
    was_live: bool = True
    # Where the figures come from: "build" (the version's own evaluation when it was made),
    # "gate" (a fine-tune's candidate as its gate measured it) or "" (not measured).
    measured_by: str = ""

    @property
    def figures(self) -> list[tuple[str, float | None]]:
        """Accuracy per test set in the table's column order."""
        return [(name, self.accuracy.get(name)) for name in SUITE_SETS]


def never_live_version_ids(*, taxonomy: Taxonomy) -> set[int]:
    """Fine-tune candidates that never served: their run was not promoted and no rollback made
    them live since. (Builds and imported versions go live as they are made.)"""
    candidates = set(
        TrainingRun.objects.filter(taxonomy=taxonomy, kind=TrainingRun.Kind.FINETUNE)
        .exclude(status=TrainingRun.Status.PROMOTED)
        .exclude(model_version=None)
        .values_list("model_version_id", flat=True)
    )
    rolled_back_to = set(
        TrainingRun.objects.filter(
            taxonomy=taxonomy,
            kind=TrainingRun.Kind.ROLLBACK,
            status=TrainingRun.Status.SUCCEEDED,
            model_version_id__in=candidates,
        ).values_list("model_version_id", flat=True)
    )
    return candidates - rolled_back_to


def model_version_was_live(version: ModelVersion) -> bool:
    return version.id not in never_live_version_ids(taxonomy=version.taxonomy)


def model_versions_page(
    *, taxonomy: Taxonomy, live: ModelVersion | None, page: str | int | None
) -> Page:
    """The taxonomy's versions, newest first, a page at a time, as ``VersionRow``s."""
    versions = (
        ModelVersion.objects.filter(taxonomy=taxonomy)
        .select_related("taxonomy", "parent__taxonomy")
        .order_by("-number")
    )
    versions_page = Paginator(versions, VERSIONS_PER_PAGE).get_page(page)
    never_live = never_live_version_ids(taxonomy=taxonomy)
    rows = []
    for version in versions_page.object_list:
        is_live = live is not None and version.id == live.id
        primary, accuracy, measured_by = suite_primary(version), suite_key_metrics(version), ""
        if primary is not None:
            measured_by = "build"
        else:
            gate = gate_candidate_metrics(version)
            if gate:
                accuracy = {name: gate.get(name) for name in SUITE_SETS}
                primary, measured_by = _mean_or_none(list(gate.values())), "gate"
        rows.append(
            VersionRow(
                version=version,
                is_live=is_live,
                primary=primary,
                accuracy=accuracy,
                was_live=is_live or version.id not in never_live,
                measured_by=measured_by,
            )
        )
    versions_page.object_list = rows
    return versions_page


def gate_candidate_metrics(version: ModelVersion) -> dict[str, float]:
    """A fine-tune candidate's accuracy per frozen test as its gate measured it (the search as
    served, over the members of the gate's day); empty for a version no gate measured."""
    rows = ((version.metrics or {}).get("gate") or {}).get("metrics") or []
    return {
        row["name"]: row["candidate"]
        for row in rows
        if row.get("suite") == "frozen" and row.get("name") in SUITE_SETS and "candidate" in row
    }


def _runs() -> QuerySet[TrainingRun]:
    return TrainingRun.objects.select_related(
        "taxonomy",
        "requested_by",
        "model_version__taxonomy",
        "parent_version__taxonomy",
        "retry_of",
    )


@dataclass(frozen=True)
class RunRow:
    """A run with what the page shows of its progress."""

    run: TrainingRun

    @property
    def active(self) -> bool:
        return run_is_active(self.run)

    @property
    def percent(self) -> int:
        return round(min(max(self.run.progress or 0.0, 0.0), 1.0) * 100)

    @property
    def eta(self) -> str:
        return duration_text(self.run.eta_seconds) if self.active else ""


def training_runs_recent(*, taxonomy: Taxonomy, limit: int = RECENT_RUNS) -> list[RunRow]:
    runs = _runs().filter(taxonomy=taxonomy).order_by("-created_at", "-id")[:limit]
    return [RunRow(run) for run in runs]


def training_run_active(*, taxonomy: Taxonomy) -> TrainingRun | None:
    """The taxonomy's active run; a constraint allows at most one."""
    return _runs().filter(taxonomy=taxonomy, status__in=TrainingRun.ACTIVE_STATUSES).first()


def training_run_get(*, run_id: int) -> TrainingRun | None:
    return _runs().filter(id=run_id).first()


def model_version_get(*, version_id: int) -> ModelVersion | None:
    return ModelVersion.objects.select_related("taxonomy").filter(id=version_id).first()


def run_is_active(run: TrainingRun) -> bool:
    return run.status in TrainingRun.ACTIVE_STATUSES


def duration_text(seconds: float | None) -> str:
    """A human ETA: "40 s", "3 min", "1 h 5 min"; empty when unknown."""
    if seconds is None or seconds < 0:
        return ""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


# --- the frozen suite's numbers of one version ------------------------------------------------


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


# --- a run's gate and flip reports ------------------------------------------------------------


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

    @property
    def ci_text(self) -> str:
        return "" if self.ci95 is None else f"[{self.ci95[0]:+.3f}, {self.ci95[1]:+.3f}]"

    @property
    def delta_text(self) -> str:
        return "" if self.delta is None else f"{self.delta:+.3f}"


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


# --- charts: the loop at work, and a run's training curve -------------------------------------

HISTORY_RUNS = 60  # the newest runs a taxonomy's history chart shows


def _mean_or_none(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def taxonomy_history_chart(*, taxonomy: Taxonomy) -> Chart:
    """Per build or fine-tune with a model (oldest first): the frozen suite's mean accuracy,
    the share of all curator verdicts the candidate gets right by itself and its share of the
    held-out verdicts, each as the gate (or, for a build, the evaluation) measured it; the
    gate's decisions marked."""
    runs = list(
        TrainingRun.objects.filter(
            taxonomy=taxonomy,
            kind__in=(TrainingRun.Kind.BUILD, TrainingRun.Kind.FINETUNE),
            model_version__isnull=False,
        )
        .select_related("model_version")
        .order_by("-id")[:HISTORY_RUNS]
    )[::-1]
    frozen, verdicts, held_out = [], [], []
    labels, markers = {}, []
    for x, run in enumerate(runs):
        report = run.gate_report or {}
        rows = report.get("metrics", [])
        mean = suite_primary(run.model_version)
        if mean is None:
            mean = _mean_or_none(
                [r["candidate"] for r in rows if r.get("suite") == "frozen" and "candidate" in r]
            )
        if mean is not None:
            frozen.append((x, mean))
        if report.get("verdicts", {}).get("count"):
            verdicts.append((x, report["verdicts"]["candidate"]))
        for row in rows:
            if row.get("name") == "held_out_feedback" and "candidate" in row:
                held_out.append((x, row["candidate"]))
        labels[x] = run.model_version.label.rsplit("/", 1)[-1]
        if report.get("decision"):
            decision = report["decision"]
            forced = f", promoted anyway by {report['forced_by']}" if "forced_by" in report else ""
            markers.append((x, decision, f"{run.model_version.label}: {decision}{forced}"))
    return Chart(
        title=f"{taxonomy.slug}: each version as measured when it was made",
        series=[
            Series("frozen suite, mean accuracy", frozen),
            Series("verdicts right by the model alone", verdicts),
            Series("held-out verdicts", held_out),
        ],
        x_labels=labels,
        markers=markers,
    )


def run_training_chart(run: TrainingRun) -> Chart | None:
    """The training curve its model stored (validation accuracy by step); None without one."""
    history = (run.model_version.metrics or {}).get("history") if run.model_version else None
    points = [
        (float(h["step"]), float(h["validation_accuracy"]))
        for h in history or []
        if "step" in h and "validation_accuracy" in h
    ]
    if not points:
        return None
    return Chart(
        title=f"{run.model_version.label}: validation accuracy by training step",
        series=[Series("validation accuracy", points)],
        x_labels={points[0][0]: f"{points[0][0]:.0f}", points[-1][0]: f"{points[-1][0]:.0f}"},
    )
