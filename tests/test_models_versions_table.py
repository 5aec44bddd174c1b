"""The Models page's versions table: a candidate the gate rejected was never live, so it offers
no rollback (and the service refuses one); it shows the figures its gate measured, marked as
such; a run's progress bar never goes back."""

from __future__ import annotations

import pytest
from django.utils import timezone

from models_app.models import ModelVersion, TrainingRun
from models_app.training.promotion import RunStateError, model_version_rollback
from models_app.training.selectors.versions import never_live_version_ids
from models_app.training.services.runs import run_progress_overall, training_run_progress_writer
from tests.models_pages.conftest import GATE_REPORT, make_run


@pytest.fixture
def first_version(tiny_taxonomy) -> ModelVersion:
    return ModelVersion.objects.get(taxonomy=tiny_taxonomy, number=1)


def rejected_candidate(first_version: ModelVersion) -> ModelVersion:
    """jobs/v2 as a fine-tune leaves it when its gate rejects it: the gate's report on the
    version, no evaluation of its own, never deployed."""
    candidate = ModelVersion.objects.create(
        taxonomy=first_version.taxonomy,
        number=2,
        encoder_kind="char_ngram_tfidf",
        artifact_path="jobs/models/none",
        parent=first_version,
        metrics={"steps": 40.0, "gate": GATE_REPORT},
    )
    make_run(
        first_version.taxonomy,
        status=TrainingRun.Status.REJECTED,
        stage="done",
        progress=1.0,
        parent_version=first_version,
        model_version=candidate,
        gate_report=GATE_REPORT,
        finished_at=timezone.now(),
    )
    return candidate


@pytest.fixture
def rejected(first_version) -> ModelVersion:
    return rejected_candidate(first_version)


def version_row(page: str, label: str) -> str:
    start = page.index(f'data-label="{label}"')
    return page[start : page.index("</tr>", start)]


def test_a_rejected_candidate_offers_no_rollback_and_says_it_was_never_live(
    client, admin_user, first_version, rejected
):
    client.force_login(admin_user)
    page = client.get("/models/").content.decode()
    row = version_row(page, "jobs/v2")
    assert 'data-testid="rollback"' not in row
    assert 'data-testid="never-live"' in row
    # Why a candidate whose mean may be above the live one's did not go live: the gate's first
    # reason, how many more, and a link to its run.
    run = TrainingRun.objects.get(model_version=rejected)
    assert "The gate rejected it: typos fell by 0.050" in row
    assert "(and 1 more)" in row and f'href="/models/runs/{run.id}/"' in row
    assert "rejected-because" not in version_row(page, "jobs/v1")


def test_a_candidate_the_gate_promoted_but_whose_run_failed_gives_no_rejection(
    client, admin_user, first_version, rejected
):
    promoted = {**rejected.metrics["gate"], "decision": "promote"}
    rejected.metrics = {**rejected.metrics, "gate": promoted}
    rejected.save(update_fields=["metrics"])
    client.force_login(admin_user)
    row = version_row(client.get("/models/").content.decode(), "jobs/v2")
    assert 'data-testid="never-live"' in row and "rejected-because" not in row


def test_a_rollback_to_a_version_that_was_never_live_is_refused(
    client, admin_user, first_version, rejected
):
    with pytest.raises(RunStateError, match="jobs/v2 was never live"):
        model_version_rollback(model_version=rejected, actor=admin_user)
    client.force_login(admin_user)
    response = client.post(f"/models/versions/{rejected.id}/rollback")
    assert response.status_code == 409
    assert "jobs/v2 was never live" in response.content.decode()
    assert not TrainingRun.objects.filter(kind=TrainingRun.Kind.ROLLBACK).exists()


def test_a_candidate_rolled_back_to_once_was_live(first_version, rejected):
    assert never_live_version_ids(taxonomy=first_version.taxonomy) == {rejected.id}
    make_run(
        first_version.taxonomy,
        kind=TrainingRun.Kind.ROLLBACK,
        status=TrainingRun.Status.SUCCEEDED,
        model_version=rejected,
    )
    assert never_live_version_ids(taxonomy=first_version.taxonomy) == set()


def test_a_rejected_candidate_shows_the_figures_its_gate_measured(
    client, curator, first_version, rejected
):
    client.force_login(curator)
    page = client.get("/models/").content.decode()
    row = version_row(page, "jobs/v2")
    # typos 0.85 and composition 0.82 are frozen rows; extra_words is a drift row.
    assert '<span class="md-badge md-badge-gate" data-testid="measured-by-gate">gate</span>' in row
    assert 'data-testid="version-typos">0.850<' in row
    assert 'data-testid="version-composition">0.820<' in row
    assert 'data-testid="version-mean"' in row and ">0.835<" in row
    # The live version's own evaluation is not marked as the gate's.
    assert "measured-by-gate" not in version_row(page, "jobs/v1")
    assert 'data-testid="versions-figures-note"' in page


def test_the_run_page_says_its_figures_are_not_the_versions_tables(client, curator, rejected):
    client.force_login(curator)
    run = TrainingRun.objects.get(model_version=rejected)
    page = client.get(f"/models/runs/{run.id}/").content.decode()
    assert "not its own evaluation from when it was built" in page


def test_a_stage_maps_into_its_share_of_the_run():
    assert run_progress_overall("pairs", 0.0) == 0.0
    assert run_progress_overall("train", 0.5) == pytest.approx(0.41)
    assert run_progress_overall("index", 1.0) == pytest.approx(0.95)
    assert run_progress_overall("done", 1.0) == 1.0
    assert run_progress_overall("something new", 0.3) == 0.3
    # A fine-tune's second training moves the bar on from where its first ended.
    assert run_progress_overall("catch up", 0.5) > run_progress_overall("train", 1.0)


def test_a_runs_progress_never_goes_back(tiny_taxonomy):
    """A fine-tune's stages as they come: training stopped at 2 % by its time budget, the
    held-out check, the catch-up training from 0 %, the index, the gate."""
    run = make_run(tiny_taxonomy, stage="start", progress=0.0)
    progress = training_run_progress_writer(run_id=run.id)
    seen = []
    for stage, fraction in [
        ("pairs", 0.0), ("train", 0.02), ("evaluate", 0.0), ("catch up", 0.0), ("catch up", 0.5),
        ("encode", 0.0), ("index", 0.5), ("index", 1.0), ("evaluate", 0.5), ("promote", 0.0),
    ]:  # fmt: skip
        progress(stage, fraction, None)
        run.refresh_from_db()
        seen.append(run.progress)
        assert run.stage == stage
    assert seen == sorted(seen)
    assert seen[1] > 0 and seen[-1] == pytest.approx(0.95)


def test_versions_measured_before_the_rename_show_their_held_out_verdicts(first_version):
    """Metrics stored under the suite's old name for the held-out verdicts ("annotations/…")
    are renamed by the migration, and the table reads them, back and forth."""
    from importlib import import_module

    from django.apps import apps

    from models_app.training.selectors.reports import suite_key_metrics

    migration = import_module("models_app.migrations.0009_suite_verdicts_set")
    first_version.metrics = {
        "suite": {"typos/accuracy": 0.5, "annotations/accuracy": 0.75, "annotations/n": 4.0}
    }
    first_version.save()
    migration.forwards(apps, None)
    first_version.refresh_from_db()
    assert first_version.metrics["suite"] == {
        "typos/accuracy": 0.5,
        "verdicts/accuracy": 0.75,
        "verdicts/n": 4.0,
    }
    assert suite_key_metrics(first_version)["verdicts"] == 0.75
    migration.backwards(apps, None)
    first_version.refresh_from_db()
    assert "annotations/accuracy" in first_version.metrics["suite"]


def test_the_live_versions_parent_says_where_a_version_without_one_came_from(
    client, admin_user, first_version
):
    client.force_login(admin_user)

    def parent_shown() -> str:
        page = client.get("/models/", {"taxonomy": "jobs"}).content.decode()
        return page.split('data-testid="live-parent">', 1)[1].split("</dd>", 1)[0]

    assert parent_shown() == "— (trained from scratch)"
    # The shipped O*NET model is a student distilled from a tower (its shipped.json spec).
    first_version.config = {**first_version.config, "distill": {"teacher_version": "tower ab12"}}
    first_version.save(update_fields=["config"])
    assert parent_shown() == "— (distilled from tower ab12)"
    first_version.config = {"encoder": {"kind": "transformer"}, "training": {"max_steps": 0}}
    first_version.save(update_fields=["config"])
    assert parent_shown() == "— (the pretrained tower as it comes)"
