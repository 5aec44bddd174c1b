from __future__ import annotations

import numpy as np
import pytest
from django.utils import timezone

from annotations.models import Group, Member
from models_app.models import Deployment, IndexBuild, ModelVersion, TrainingRun
from models_app.serving.engines import artifact_path, encoder_for, live_engine
from models_app.serving.normalize import rank_taxonomy_groups
from models_app.siamese.index import MemberIndex
from models_app.training import run_execution
from models_app.training.retraining import training_run_retry
from models_app.training.run_execution import training_run_execute
from models_app.training.services.indexes import taxonomy_needs_reindex
from models_app.training.services.runs import training_run_request, training_runs_fail_stale
from tests.conftest import TINY_MODEL


def add_member(taxonomy, code: str, text: str) -> Member:
    group = Group.objects.get(taxonomy=taxonomy, code=code)
    return Member.objects.create(
        taxonomy=taxonomy, group=group, text=text, normalized_text=text.lower(), source="admin"
    )


def test_the_first_build_makes_a_live_version_and_index(tiny_taxonomy):
    deployment = Deployment.objects.get(taxonomy=tiny_taxonomy)
    assert deployment.index_build.size == Member.objects.count() == 21
    version = deployment.index_build.model_version
    assert (version.number, version.encoder_kind, version.trained_on_members) == (
        1,
        "char_ngram_tfidf",
        21,
    )
    assert version.config["encoder"]["dim"] == TINY_MODEL["encoder"]["dim"]
    assert len(version.data_sha256) == 64


def test_running_a_run_twice_does_the_work_once(tiny_taxonomy):
    run = training_run_request(taxonomy=tiny_taxonomy, kind="reindex", enqueue=False)
    assert training_run_execute(run_id=run.id).status == "succeeded"
    assert training_run_execute(run_id=run.id) is None
    assert IndexBuild.objects.count() == 2


def test_only_one_run_per_taxonomy_is_active(tiny_taxonomy):
    first = training_run_request(taxonomy=tiny_taxonomy, kind="reindex", enqueue=False)
    assert first is not None
    assert training_run_request(taxonomy=tiny_taxonomy, kind="build", enqueue=False) is None
    assert TrainingRun.objects.filter(status="queued").count() == 1


def test_members_added_after_the_build_are_found_before_any_reindex(tiny_taxonomy):
    member = add_member(tiny_taxonomy, "35-3023", "Latte Art Specialist")
    assert taxonomy_needs_reindex(tiny_taxonomy)
    (result,) = rank_taxonomy_groups(tiny_taxonomy, ["latte art specialist"], k=1)
    assert (result.groups[0].code, result.groups[0].member_id) == ("35-3023", member.id)
    assert result.source == "model"


def test_a_reindex_takes_new_members_in_and_swaps_the_live_index(tiny_taxonomy):
    old_build = Deployment.objects.get().index_build
    member = add_member(tiny_taxonomy, "35-3023", "Latte Art Specialist")
    run = training_run_request(taxonomy=tiny_taxonomy, kind="reindex", enqueue=False)
    run = training_run_execute(run_id=run.id)
    assert run.status == "succeeded"
    new_build = Deployment.objects.get().index_build
    assert new_build.id != old_build.id
    assert (new_build.size, new_build.max_member_id) == (22, member.id)
    assert new_build.model_version_id == old_build.model_version_id
    assert not taxonomy_needs_reindex(tiny_taxonomy)
    engine = live_engine(tiny_taxonomy)
    assert engine.index_build_id == new_build.id
    assert engine.delta_vectors()[0].size == 0


def test_a_reindex_with_the_live_model_encodes_only_the_members_added_since(
    tiny_taxonomy, monkeypatch
):
    old_build = Deployment.objects.get().index_build
    old_index = MemberIndex.load(artifact_path(old_build.artifact_path))
    member = add_member(tiny_taxonomy, "35-3023", "Latte Art Specialist")
    encoder = encoder_for(old_build.model_version)
    encoded: list[str] = []
    real_encode = encoder.encode

    def counting_encode(texts, *args, **kwargs):
        encoded.extend(texts)
        return real_encode(texts, *args, **kwargs)

    monkeypatch.setattr(encoder, "encode", counting_encode)
    run = training_run_request(taxonomy=tiny_taxonomy, kind="reindex", enqueue=False)
    assert training_run_execute(run_id=run.id).status == "succeeded"

    assert encoded == ["Latte Art Specialist"]
    new_index = MemberIndex.load(artifact_path(Deployment.objects.get().index_build.artifact_path))
    old_ids = old_index.member_ids()
    np.testing.assert_array_equal(new_index.vectors_of(old_ids), old_index.vectors_of(old_ids))
    np.testing.assert_allclose(
        new_index.vectors_of(np.array([member.id])), real_encode(["Latte Art Specialist"])
    )


def test_removed_members_are_never_returned_and_mark_the_index_stale(tiny_taxonomy):
    Member.objects.filter(text="ICU Nurse").delete()
    assert taxonomy_needs_reindex(tiny_taxonomy)
    (result,) = rank_taxonomy_groups(tiny_taxonomy, ["ICU Nurse"], k=5)
    assert "ICU Nurse" not in [group.member for group in result.groups]


def test_a_failed_run_is_recorded_and_leaves_the_live_model_serving(tiny_taxonomy):
    live_before = Deployment.objects.get().index_build_id
    run = training_run_request(
        taxonomy=tiny_taxonomy, kind="build", config={"encoder": {"dim": 1}}, enqueue=False
    )
    run = training_run_execute(run_id=run.id)
    assert run.status == "failed"
    assert "dim must be between 2 and 4096" in run.error
    assert run.finished_at is not None
    assert Deployment.objects.get().index_build_id == live_before
    assert ModelVersion.objects.count() == 1
    (result,) = rank_taxonomy_groups(tiny_taxonomy, ["staff nurse"], k=1)
    assert result.groups[0].code == "29-1141"


def test_a_build_without_activate_leaves_the_live_version_alone(tiny_taxonomy):
    run = training_run_request(
        taxonomy=tiny_taxonomy, kind="build", config=TINY_MODEL, activate=False, enqueue=False
    )
    run = training_run_execute(run_id=run.id)
    assert run.model_version.number == 2
    assert Deployment.objects.get().index_build.model_version.number == 1


def test_a_new_live_version_reaches_a_process_that_loaded_the_old_one(tiny_taxonomy):
    first = live_engine(tiny_taxonomy)
    run = training_run_request(
        taxonomy=tiny_taxonomy,
        kind="build",
        config={"encoder": {"dim": 16, "min_df": 1}},
        enqueue=False,
    )
    training_run_execute(run_id=run.id)
    second = live_engine(tiny_taxonomy)
    assert (first.model_label, second.model_label) == ("jobs/v1", "jobs/v2")
    assert second.encoder.dim == 16
    vectors = second.encoder.encode(["nurse"])
    assert np.isclose(np.linalg.norm(vectors), 1.0)


def test_runs_whose_heartbeat_stopped_are_marked_failed_and_retriable(tiny_taxonomy):
    run = training_run_request(taxonomy=tiny_taxonomy, kind="reindex", enqueue=False)
    TrainingRun.objects.filter(id=run.id).update(
        status="running",
        started_at=timezone.now() - timezone.timedelta(hours=3),
        heartbeat_at=timezone.now() - timezone.timedelta(minutes=20),
    )
    assert training_runs_fail_stale(silent_for_seconds=600) == 1
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.error.startswith("the worker stopped before the run finished")
    assert training_run_request(taxonomy=tiny_taxonomy, kind="reindex", enqueue=False) is not None


def test_a_long_run_with_a_recent_heartbeat_is_left_alone(tiny_taxonomy):
    run = training_run_request(taxonomy=tiny_taxonomy, kind="reindex", enqueue=False)
    TrainingRun.objects.filter(id=run.id).update(
        status="running",
        started_at=timezone.now() - timezone.timedelta(hours=3),
        heartbeat_at=timezone.now() - timezone.timedelta(seconds=30),
    )
    assert training_runs_fail_stale(silent_for_seconds=600) == 0
    run.refresh_from_db()
    assert run.status == "running"


@pytest.mark.parametrize("given_up_at", ["index", "evaluate"])
def test_a_run_given_up_on_as_silent_whose_worker_was_alive_stops_and_changes_nothing(
    tiny_taxonomy, admin_user, monkeypatch, given_up_at
):
    """Its retry is queued the moment it is marked failed: the first worker must not then make
    its own version live, nor write the run's status over."""
    writer = run_execution.training_run_progress_writer
    retries = []

    def given_up_on(*, run_id):
        report = writer(run_id=run_id)

        def progress(stage, fraction, eta=None):
            if stage == given_up_at and not retries:
                assert training_runs_fail_stale(silent_for_seconds=-60) == 1
                retries.append(
                    training_run_retry(run=TrainingRun.objects.get(id=run_id), actor=admin_user)
                )
            report(stage, fraction, eta)

        return progress

    monkeypatch.setattr(run_execution, "training_run_progress_writer", given_up_on)
    live = Deployment.objects.get(taxonomy=tiny_taxonomy).index_build_id
    versions = set(ModelVersion.objects.values_list("id", flat=True))
    run = training_run_request(taxonomy=tiny_taxonomy, kind="build", config=TINY_MODEL,
                               enqueue=False)  # fmt: skip
    done = training_run_execute(run_id=run.id)
    assert done.status == "failed"
    assert done.error.startswith("the worker stopped before the run finished")
    assert Deployment.objects.get(taxonomy=tiny_taxonomy).index_build_id == live
    assert set(ModelVersion.objects.values_list("id", flat=True)) == versions  # its own went
    (retry,) = retries
    retry.refresh_from_db()
    assert (retry.status, retry.retry_of_id) == ("queued", run.id)
    assert training_run_execute(run_id=retry.id).status == "succeeded"


@pytest.mark.parametrize(
    ("kind", "reason"),
    [("build", "no member strings to train on"), ("reindex", "has no live model yet")],
)
def test_a_taxonomy_without_members_or_model_fails_with_a_reason(db, kind, reason):
    from annotations.models import Taxonomy

    taxonomy = Taxonomy.objects.create(slug="empty", name="Empty")
    run = training_run_request(taxonomy=taxonomy, kind=kind, enqueue=False)
    run = training_run_execute(run_id=run.id)
    assert run.status == "failed"
    assert reason in run.error
