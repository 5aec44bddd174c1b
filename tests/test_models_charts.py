"""The Models page plots the loop at work (each version as measured, the gate's decisions) and a
run's page its training curve, as inline SVG drawn on the server."""

from __future__ import annotations

import re

import pytest

from models_app.models import ModelVersion, TrainingRun
from models_app.training.charts import Chart, Series, line_chart_svg
from models_app.training.run_execution import training_run_execute
from models_app.training.services.runs import training_run_request
from tests.models_pages.conftest import first_version, rejected_finetune  # noqa: F401 (fixtures)

TRAINED = {
    "encoder": {"kind": "ngram_bag", "buckets": 1024, "embedding_dim": 8, "output_dim": 8},
    "training": {"max_steps": 30, "eval_every": 10, "batch_size": 16},
}


def points_of(svg: str, series: str) -> list[tuple[float, float]]:
    group = re.search(rf'<g data-series="{re.escape(series)}">(.*?)</g>', svg, re.S).group(1)
    return [(float(x), float(y)) for x, y in re.findall(r'cx="([\d.]+)" cy="([\d.]+)"', group)]


def test_a_chart_puts_higher_values_higher_and_escapes_every_text():
    chart = Chart(
        title="<b>title</b>",
        series=[Series("<script>alert(1)</script>", [(0, 0.2), (1, 0.8), (2, 0.5)])],
        x_labels={0: "v1", 2: "<v3>"},
        markers=[(1, "reject", "jobs/v2: reject")],
    )
    svg = str(line_chart_svg(chart))
    assert "<script>" not in svg and "<b>" not in svg and "&lt;v3&gt;" in svg
    (low, high, middle) = points_of(svg, "&lt;script&gt;alert(1)&lt;/script&gt;")
    assert low[0] < high[0] < middle[0]  # left to right
    assert high[1] < middle[1] < low[1]  # SVG's y grows downwards
    assert svg.count('data-marker="reject"') == 1


def test_an_empty_chart_draws_nothing():
    assert line_chart_svg(Chart(title="t", series=[Series("s", [])])) == ""


def test_the_models_page_plots_each_version_and_marks_the_gates_decisions(
    client,
    curator,
    rejected_finetune,  # noqa: F811
):
    # A version no run made (a shipped model imported) is plotted too, as its record says.
    ModelVersion.objects.create(
        taxonomy=rejected_finetune.taxonomy,
        number=3,
        encoder_kind="ngram_bag",
        artifact_path="jobs/models/shipped",
        metrics={"suite": {"mean_accuracy": 0.9}},
    )
    client.force_login(curator)
    page = client.get("/models/").content.decode()
    svg = re.search(r'data-testid="history">.*?(<svg.*?</svg>)', page, re.S).group(1)
    # Each version, oldest first: jobs/v1 (built), jobs/v2 (the candidate of the fine-tune
    # the gate rejected) and jobs/v3 (imported, no run).
    assert len(points_of(svg, "frozen suite, mean accuracy")) == 3
    assert ">v3</text>" in svg
    # Every series' name whole in the legend.
    assert ">verdicts right by the model alone</text>" in svg
    assert len(points_of(svg, "verdicts right by the model alone")) == 1  # the gate's 0.75
    assert len(points_of(svg, "held-out verdicts")) == 1
    assert 'data-marker="reject"' in svg and "jobs/v2: reject" in svg


def test_a_runs_page_plots_its_training_curve(client, curator, tiny_taxonomy):
    run = training_run_request(
        taxonomy=tiny_taxonomy, kind="build", config=TRAINED, activate=False, enqueue=False
    )
    run = training_run_execute(run_id=run.id)
    assert run.status == TrainingRun.Status.SUCCEEDED, run.error
    steps = [point["step"] for point in run.model_version.metrics["history"]]
    assert steps == [10, 20, 30]
    client.force_login(curator)
    page = client.get(f"/models/runs/{run.id}/").content.decode()
    curve = re.search(r'data-testid="training-curve">(.*?)</section>', page, re.S).group(1)
    assert len(points_of(curve, "validation accuracy")) == 3


@pytest.mark.parametrize("kind", ["build"])
def test_a_run_without_a_stored_curve_shows_none(client, curator, tiny_taxonomy, kind):
    run = TrainingRun.objects.filter(taxonomy=tiny_taxonomy, kind=kind).first()
    client.force_login(curator)
    page = client.get(f"/models/runs/{run.id}/").content.decode()
    assert 'data-testid="training-curve"' not in page  # TF-IDF is fitted, not trained


def y_labels(svg: str) -> list[float]:
    return [
        float(v)
        for v in re.findall(r'text-anchor="end" font-size="10" fill="#6b7280">(-?[\d.]+)<', svg)
    ]


def test_the_history_axis_stays_within_what_a_share_can_be(
    client,
    curator,
    rejected_finetune,  # noqa: F811
):
    """A candidate that got none of its one held-out verdict right is plotted at 0: the axis
    starts there, not below what a share can be (it ran from -0.09)."""
    report = rejected_finetune.gate_report
    report = {
        **report,
        "metrics": [
            {**row, "candidate": 0.0} if row["name"] == "held_out_feedback" else row
            for row in report["metrics"]
        ],
    }
    TrainingRun.objects.filter(id=rejected_finetune.id).update(gate_report=report)
    client.force_login(curator)
    page = client.get("/models/").content.decode()
    svg = re.search(r'data-testid="history">.*?(<svg.*?</svg>)', page, re.S).group(1)
    labels = y_labels(svg)
    assert min(labels) == 0.0 and max(labels) <= 1.0, labels
