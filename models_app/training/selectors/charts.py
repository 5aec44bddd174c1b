"""The Models page's charts: each version of a taxonomy as measured over time, with the gate's
decisions marked, and a run's training curve."""

from __future__ import annotations

from annotations.models import Taxonomy
from models_app.models import ModelVersion, TrainingRun
from models_app.training.charts import Chart, Series
from models_app.training.selectors.reports import suite_primary

HISTORY = 60  # the newest versions a taxonomy's history chart shows


def mean_or_none(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def taxonomy_history_chart(*, taxonomy: Taxonomy) -> Chart:
    """Per model version (oldest first), whether a run built it, fine-tuned it or it was
    imported (a shipped model has no run): the frozen suite's mean accuracy, the share of all
    curator verdicts the candidate gets right by itself and its share of the held-out
    verdicts, each as the gate (or, for a build, the evaluation) measured it; the gate's
    decisions marked."""
    versions = list(
        ModelVersion.objects.filter(taxonomy=taxonomy)
        .select_related("taxonomy")
        .order_by("-number")[:HISTORY]
    )
    versions.reverse()
    runs = {
        run.model_version_id: run
        for run in TrainingRun.objects.filter(
            model_version__in=versions,
            kind__in=(TrainingRun.Kind.BUILD, TrainingRun.Kind.FINETUNE),
        ).order_by("id")
    }
    frozen, verdicts, held_out = [], [], []
    labels, markers = {}, []
    for x, version in enumerate(versions):
        run = runs.get(version.id)
        report = (run.gate_report if run is not None else None) or {}
        rows = report.get("metrics", [])
        mean = suite_primary(version)
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
        labels[x] = version.label.rsplit("/", 1)[-1]
        if report.get("decision"):
            decision = report["decision"]
            forced = f", promoted anyway by {report['forced_by']}" if "forced_by" in report else ""
            markers.append((x, decision, f"{version.label}: {decision}{forced}"))
    return Chart(
        title=f"{taxonomy.slug}: each version as measured when it was made",
        series=[
            Series("frozen suite, mean accuracy", frozen),
            Series("verdicts right by the model alone", verdicts),
            Series("held-out verdicts", held_out),
        ],
        x_labels=labels,
        markers=markers,
        y_bounds=(0.0, 1.0),  # every series is a share of cases right
    )


def run_validations(run: TrainingRun) -> list[tuple[float, float]]:
    """(step, validation accuracy) of each validation its model stored, in step order."""
    history = (run.model_version.metrics or {}).get("history") if run.model_version else None
    return [
        (float(h["step"]), float(h["validation_accuracy"]))
        for h in history or []
        if "step" in h and "validation_accuracy" in h
    ]


def run_training_chart(run: TrainingRun) -> Chart | None:
    """The training curve its model stored (validation accuracy by step); None with fewer than
    three validations: one is a dot and two a straight line, neither a curve (the page says the
    figures instead)."""
    points = run_validations(run)
    if len(points) < 3:
        return None
    return Chart(
        title=f"{run.model_version.label}: validation accuracy by training step",
        series=[Series("validation accuracy", points)],
        y_bounds=(0.0, 1.0),
        x_labels={points[0][0]: f"{points[0][0]:.0f}", points[-1][0]: f"{points[-1][0]:.0f}"},
    )
