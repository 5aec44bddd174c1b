"""The Models page's charts: each version of a taxonomy as measured over time, with the gate's
decisions marked, and a run's training curve."""

from __future__ import annotations

from annotations.models import Taxonomy
from models_app.charts import Chart, Series
from models_app.models import TrainingRun
from models_app.selectors.reports import suite_primary

HISTORY_RUNS = 60  # the newest runs a taxonomy's history chart shows


def mean_or_none(values: list[float]) -> float | None:
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
            mean = mean_or_none(
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
