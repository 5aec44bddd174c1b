"""Old index builds are deleted as new ones go live, never one still in use: the live one, the
one a bulk job answers with to its end, a rejected candidate's that an admin may promote."""

from __future__ import annotations

import io

from django.utils import timezone

from models_app.bulk.jobs import bulk_job_create
from models_app.bulk.run import bulk_job_execute
from models_app.models import BulkJob, Deployment, IndexBuild, TrainingRun
from models_app.serving.engines import artifact_path
from models_app.training.promotion import live_version, training_run_promote
from models_app.training.run_execution import training_run_execute
from models_app.training.services.indexes import KEEP_INDEX_BUILDS
from models_app.training.services.runs import training_run_request
from tests.conftest import TINY_MODEL


def reindexed(taxonomy, times: int) -> None:
    for _ in range(times):
        run = training_run_request(taxonomy=taxonomy, kind="reindex", enqueue=False)
        assert training_run_execute(run_id=run.id).status == "succeeded"


def live_build(taxonomy) -> IndexBuild:
    return Deployment.objects.get(taxonomy=taxonomy).index_build


def test_reindexes_keep_the_live_build_and_the_newest_before_it(tiny_taxonomy):
    first = live_build(tiny_taxonomy)
    reindexed(tiny_taxonomy, KEEP_INDEX_BUILDS + 1)
    builds = list(IndexBuild.objects.filter(taxonomy=tiny_taxonomy).order_by("-id"))
    assert len(builds) == KEEP_INDEX_BUILDS
    assert builds[0] == live_build(tiny_taxonomy)
    assert not IndexBuild.objects.filter(id=first.id).exists()
    assert not artifact_path(first.artifact_path).exists()  # its folder went with it


def test_a_rejected_candidates_index_outlives_reindexes_and_it_can_still_be_promoted(
    tiny_taxonomy, admin_user
):
    live = live_version(tiny_taxonomy)
    made = training_run_request(taxonomy=tiny_taxonomy, kind="build", config=TINY_MODEL,
                                activate=False, enqueue=False)  # fmt: skip
    made = training_run_execute(run_id=made.id)
    rejected = TrainingRun.objects.create(
        taxonomy=tiny_taxonomy, kind=TrainingRun.Kind.FINETUNE,
        status=TrainingRun.Status.REJECTED, parent_version=live,
        model_version=made.model_version, index_build=made.index_build,
        gate_report={"promote": False, "reasons": ["not better"]}, finished_at=timezone.now(),
    )  # fmt: skip
    reindexed(tiny_taxonomy, KEEP_INDEX_BUILDS + 1)
    rejected.refresh_from_db()
    assert rejected.index_build == made.index_build
    assert artifact_path(made.index_build.artifact_path).exists()
    promoted = training_run_promote(run=rejected, actor=admin_user)
    assert promoted.status == "promoted"
    assert live_build(tiny_taxonomy) == made.index_build


def test_a_bulk_jobs_index_outlives_reindexes_until_the_job_ends(tiny_taxonomy):
    started_with = live_build(tiny_taxonomy)
    titles = ["Senior Tax Accountant", "java programmer", "barista with latte art", "ICU nurse"]
    job = bulk_job_create(
        taxonomy=tiny_taxonomy, upload=io.BytesIO(("title\n" + "\n".join(titles * 3)).encode()),
        filename="titles.csv", column="title", user=None, enqueue=False,
    )  # fmt: skip

    def reindexed_once(_job) -> None:
        if live_build(tiny_taxonomy) == started_with:
            reindexed(tiny_taxonomy, KEEP_INDEX_BUILDS + 1)

    done = bulk_job_execute(job_id=job.id, chunk_rows=4, after_chunk=reindexed_once)
    assert done.status == "succeeded", done.error
    assert live_build(tiny_taxonomy) != started_with
    assert done.index_build == started_with  # answered with it to the end
    assert (done.rows_done, done.rows_failed) == (12, 0)
    # Once the job has ended, the next activation's pruning may delete it.
    reindexed(tiny_taxonomy, 1)
    assert not IndexBuild.objects.filter(id=started_with.id).exists()


def test_a_job_or_run_with_no_build_named_does_not_stop_pruning(tiny_taxonomy):
    """A queued bulk job names its build only when its first chunk starts, and an older
    rejected candidate may have lost its index: neither keeps anything else from going."""
    first = live_build(tiny_taxonomy)
    bulk_job_create(taxonomy=tiny_taxonomy, upload=io.BytesIO(b"title\nnurse\n"),
                    filename="t.csv", column="title", user=None, enqueue=False)  # fmt: skip
    TrainingRun.objects.create(
        taxonomy=tiny_taxonomy, kind=TrainingRun.Kind.FINETUNE,
        status=TrainingRun.Status.REJECTED, index_build=None, finished_at=timezone.now(),
    )  # fmt: skip
    reindexed(tiny_taxonomy, KEEP_INDEX_BUILDS + 1)
    assert IndexBuild.objects.filter(taxonomy=tiny_taxonomy).count() == KEEP_INDEX_BUILDS
    assert not IndexBuild.objects.filter(id=first.id).exists()


def test_a_failed_bulk_jobs_build_stays_for_its_retry(tiny_taxonomy):
    started_with = live_build(tiny_taxonomy)
    job = bulk_job_create(taxonomy=tiny_taxonomy, upload=io.BytesIO(b"title\nnurse\n"),
                          filename="t.csv", column="title", user=None, enqueue=False)  # fmt: skip
    BulkJob.objects.filter(id=job.id).update(
        status=BulkJob.Status.FAILED, index_build=started_with,
        model_version=started_with.model_version,
    )  # fmt: skip
    reindexed(tiny_taxonomy, KEEP_INDEX_BUILDS + 1)
    assert IndexBuild.objects.filter(id=started_with.id).exists()
