"""New members reach a real worker through Redis, which rebuilds the index in PostgreSQL rows."""

from __future__ import annotations

import pytest

from annotations.models import Group, Member
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from models_app.models import Deployment, IndexBuild, TrainingRun
from models_app.serving.engines import artifact_path, encoder_for
from models_app.serving.normalize import rank_taxonomy_groups
from models_app.siamese.index import MemberIndex
from tests.integration.conftest import wait_for
from worker.tasks import execute_training_run, reindex_stale_taxonomies

pytestmark = pytest.mark.integration


def finished_run(kind: str, log):
    def check():
        return (
            TrainingRun.objects.filter(kind=kind, status__in=["succeeded", "failed"])
            .order_by("-id")
            .first()
        )

    return wait_for(check, f"a finished {kind} run", log)


def test_the_scheduled_check_folds_a_verdicts_member_into_the_live_index(
    worker, tiny_taxonomy, curator
):
    first_build = Deployment.objects.get().index_build
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Barista"], source="api")
    baristas = Group.objects.get(taxonomy=tiny_taxonomy, code="35-3023")

    judgement_create(review_item=item, user=curator, verdict="reassign", group=baristas)
    reindex_stale_taxonomies.delay()

    run = finished_run("reindex", worker.log)
    assert run.status == "succeeded", run.error
    assert (run.trigger, run.stage, run.progress) == ("schedule", "done", 1.0)
    assert run.started_at is not None and run.finished_at >= run.started_at
    live = Deployment.objects.get().index_build
    assert live.id == run.index_build_id != first_build.id
    curator_member = Member.objects.get(source="curator")
    assert (live.size, live.max_member_id) == (22, curator_member.id)
    # The file the worker wrote holds the curator's string, findable by its own vector.
    index = MemberIndex.load(artifact_path(live.artifact_path))
    query = encoder_for(live.model_version).encode(["Java Barista"])
    assert index.search(query, 1)[1][0][0] == curator_member.id
    (result,) = rank_taxonomy_groups(tiny_taxonomy, ["java barista"], k=3)
    assert (result.source, result.groups[0].code) == ("curator", "35-3023")


def test_the_scheduled_check_reindexes_a_taxonomy_with_new_members(worker, tiny_taxonomy):
    nurses = Group.objects.get(taxonomy=tiny_taxonomy, code="29-1141")
    Member.objects.create(
        taxonomy=tiny_taxonomy,
        group=nurses,
        text="Night Nurse",
        normalized_text="night nurse",
        source="admin",
    )
    reindex_stale_taxonomies.delay()
    run = finished_run("reindex", worker.log)
    assert (run.status, run.trigger) == ("succeeded", "schedule")
    assert Deployment.objects.get().index_build.size == 22


def test_a_run_delivered_twice_is_carried_out_once(worker, tiny_taxonomy):
    run = TrainingRun.objects.create(taxonomy=tiny_taxonomy, kind="reindex")
    execute_training_run.delay(run.id)
    execute_training_run.delay(run.id)
    finished = finished_run("reindex", worker.log)
    assert finished.status == "succeeded"
    wait_for(
        lambda: worker.log.read_text().count("execute_training_run") >= 4,  # 2 received, 2 done
        "both deliveries to be handled",
        worker.log,
    )
    assert IndexBuild.objects.count() == 2  # the fixture's build and this run's, no third
