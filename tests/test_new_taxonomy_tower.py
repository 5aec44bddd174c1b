"""A new taxonomy serves at once with the pretrained tower as it comes, then its first training
is queued; a model and index that cannot serve together never go live."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import OperationalError

from annotations.services.taxonomy import taxonomy_import
from models_app.models import Deployment, ModelVersion, TrainingRun
from models_app.serving.engines import encoder_for
from models_app.serving.normalize import rank_taxonomy_groups
from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.specs import PRETRAINED_SPEC, STUDENT_SPEC, TOWER_SPEC, parse_model_spec
from models_app.training.retraining import retrain_due_taxonomies
from models_app.training.run_execution import training_run_execute
from models_app.training.services.indexes import deployment_activate, index_build_create
from models_app.training.services.runs import first_training_request, taxonomy_model_refresh
from tests.conftest import TINY_CSV, build_live_model
from tests.test_match_probability import judge_all
from worker import tasks


@pytest.fixture
def new_taxonomy(db):
    return taxonomy_import(slug="fresh", path=TINY_CSV, fmt="csv", name="Fresh").taxonomy


def test_an_imported_taxonomy_serves_with_the_pretrained_tower_then_queues_its_training(
    new_taxonomy,
):
    run = taxonomy_model_refresh(taxonomy=new_taxonomy)
    assert (run.kind, run.config) == ("build", PRETRAINED_SPEC)
    # The worker's task: the build, then the first training queued behind it.
    assert tasks.execute_training_run.run(run.id) == "succeeded"
    version = Deployment.objects.get(taxonomy=new_taxonomy).index_build.model_version
    assert version.encoder_kind == "transformer"
    assert version.config["training"]["max_steps"] == 0
    assert version.metrics["steps"] == 0.0
    # No 409: the taxonomy answers, by meaning (no string of "RN" is in "Registered Nurse").
    [result] = rank_taxonomy_groups(new_taxonomy, ["RN night shift"], k=3)
    assert result.groups[0].name == "Registered Nurses"
    queued = TrainingRun.objects.filter(taxonomy=new_taxonomy, status="queued").get()
    assert (queued.kind, queued.trigger, queued.config) == ("build", "import", TOWER_SPEC)


def test_first_training_is_queued_once_and_only_after_the_pretrained_build(new_taxonomy, settings):
    run = taxonomy_model_refresh(taxonomy=new_taxonomy)
    assert first_training_request(run=run) is None  # still queued: nothing went live yet
    run = training_run_execute(run_id=run.id)
    settings.SIAMWEB_TRAIN_NEW_TAXONOMIES = False
    assert first_training_request(run=run) is None
    settings.SIAMWEB_TRAIN_NEW_TAXONOMIES = True
    follow_up = first_training_request(run=run)
    assert follow_up is not None and follow_up.config == TOWER_SPEC
    assert first_training_request(run=run) is None  # one active run a taxonomy


def test_no_first_training_once_the_taxonomy_has_a_trained_model(tiny_taxonomy):
    run = TrainingRun.objects.create(
        taxonomy=tiny_taxonomy, kind="build", status="succeeded", config=PRETRAINED_SPEC
    )
    assert ModelVersion.objects.filter(taxonomy=tiny_taxonomy).exists()
    assert first_training_request(run=run) is None


def test_zero_training_steps_are_refused_for_an_encoder_that_starts_untrained():
    with pytest.raises(Exception, match="only a pretrained encoder can"):
        parse_model_spec({"encoder": {"kind": "ngram_bag"}, "training": {"max_steps": 0}})


def test_train_command_takes_a_built_in_spec_by_name(new_taxonomy, capsys):
    call_command("train", "fresh", "--spec", "pretrained", "--activate")
    assert "fresh/v1: transformer" in capsys.readouterr().out
    with pytest.raises(CommandError, match="invalid choice"):
        call_command("train", "fresh", "--spec", "huge")


def test_a_model_and_index_of_different_dimensions_never_go_live(tiny_taxonomy):
    live = Deployment.objects.get(taxonomy=tiny_taxonomy).index_build
    tower = training_run_execute(
        run_id=TrainingRun.objects.create(
            taxonomy=tiny_taxonomy, kind="build", config=PRETRAINED_SPEC, activate=False
        ).id
    ).model_version
    mismatched = index_build_create(model_version=tower)
    mismatched.model_version = live.model_version  # 384-d vectors under a 32-d model
    mismatched.save(update_fields=["model_version"])
    with pytest.raises(ArtifactError, match="cannot serve together"):
        deployment_activate(index_build=mismatched)
    assert Deployment.objects.get(taxonomy=tiny_taxonomy).index_build == live
    # build_live_model still works after the refusal: nothing was left half-done.
    build_live_model(tiny_taxonomy)


def test_a_tower_spec_without_training_options_gets_the_towers_own():
    _, training = parse_model_spec({"encoder": {"kind": "transformer"}})
    assert (training.learning_rate, training.batch_size) == (3e-5, 128)
    _, training = parse_model_spec(PRETRAINED_SPEC)
    assert (training.max_steps, training.learning_rate) == (0, 3e-5)
    _, asked = parse_model_spec({"encoder": {"kind": "transformer"}, "training": {"seed": 4}})
    assert (asked.seed, asked.learning_rate) == (4, 3e-5)


def test_a_fine_tune_of_the_pretrained_tower_trains(new_taxonomy):
    from types import SimpleNamespace

    from models_app.training.finetune_recipe import finetune_spec

    run = training_run_execute(run_id=taxonomy_model_refresh(taxonomy=new_taxonomy).id)
    parent = SimpleNamespace(config=run.model_version.config)
    _, training = parse_model_spec(finetune_spec(parent, {}))
    assert training.max_steps > 0 and training.learning_rate == 3e-5


def test_an_imported_tower_folder_serves_as_a_tower(new_taxonomy, tmp_path):
    from models_app.siamese.encoders import parse_config
    from models_app.siamese.towers import TransformerEncoder
    from models_app.training.services.builds import model_version_import

    TransformerEncoder.create([], parse_config({"kind": "transformer"})).save(tmp_path / "tower")
    version = model_version_import(taxonomy=new_taxonomy, folder=tmp_path / "tower")
    assert version.config["search"] == TOWER_SPEC["search"]
    deployment_activate(index_build=index_build_create(model_version=version))
    [result] = rank_taxonomy_groups(new_taxonomy, ["RN night shift"], k=1)
    assert result.groups[0].name == "Registered Nurses"


def test_a_build_evaluates_with_its_index_vectors_not_a_second_encoding(new_taxonomy):
    from models_app.siamese.specs import PRETRAINED_SPEC as SPEC
    from models_app.training.services.builds import model_version_evaluate

    run = training_run_execute(
        run_id=TrainingRun.objects.create(taxonomy=new_taxonomy, kind="build", config=SPEC).id
    )
    version = run.model_version
    # Evaluated again, without the index: the same figures, so the vectors were the same.
    stored = version.metrics["suite"]
    again = model_version_evaluate(model_version=version)
    assert again == pytest.approx(stored)
    assert "validation_accuracy" not in version.metrics  # 0 steps: nothing validated


QUICK_STUDENT = {
    "encoder": {"kind": "ngram_bag", "buckets": 4096, "embedding_dim": 64, "output_dim": 384},
    "distill": {"teacher": "live", "max_steps": 200, "batch_size": 32, "learning_rate": 0.02},
    "search": {"lexical_weight": 0.0},
}


def test_the_trained_tower_is_followed_by_its_student(new_taxonomy):
    run = TrainingRun.objects.create(
        taxonomy=new_taxonomy, kind="build", status="succeeded", config=TOWER_SPEC
    )
    follow_up = first_training_request(run=run)
    assert follow_up is not None and follow_up.config == STUDENT_SPEC


def test_a_student_is_distilled_from_the_live_tower_and_serves(new_taxonomy):
    training_run_execute(run_id=taxonomy_model_refresh(taxonomy=new_taxonomy).id)
    run = TrainingRun.objects.create(taxonomy=new_taxonomy, kind="build", config=QUICK_STUDENT)
    run = training_run_execute(run_id=run.id)
    assert run.status == "succeeded", run.error
    student = Deployment.objects.get(taxonomy=new_taxonomy).index_build.model_version
    assert (student.encoder_kind, student.label) == ("ngram_bag", "fresh/v2")
    assert student.config["distill"]["teacher_version"] == "fresh/v1"
    assert student.metrics["teacher_cosine"] > 0.3 and student.metrics["steps"] == 200
    [result] = rank_taxonomy_groups(new_taxonomy, ["Staff Nurse"], k=1)
    assert result.groups[0].name == "Registered Nurses" and result.model_version == "fresh/v2"


def test_a_student_takes_its_live_teachers_dimension_unless_its_spec_names_one(tiny_taxonomy):
    # The live model is a 32-d TF-IDF (the shipped O*NET student is 128-d, a tower 384-d).
    unnamed = {**QUICK_STUDENT, "encoder": {"kind": "ngram_bag", "buckets": 4096}}
    run = TrainingRun.objects.create(taxonomy=tiny_taxonomy, kind="build", config=unnamed)
    run = training_run_execute(run_id=run.id)
    assert run.status == "succeeded", run.error
    assert run.model_version.config["encoder"]["output_dim"] == 32
    assert run.model_version.config["distill"]["teacher_version"] == "jobs/v1"
    assert encoder_for(run.model_version).dim == 32
    # A spec that names another dimension is refused by name, and the live model stays.
    run = TrainingRun.objects.create(taxonomy=tiny_taxonomy, kind="build", config=QUICK_STUDENT)
    run = training_run_execute(run_id=run.id)
    assert run.status == "failed" and "output_dim (384)" in run.error and "(32)" in run.error
    live = Deployment.objects.get(taxonomy=tiny_taxonomy).index_build.model_version
    assert live.label == "jobs/v2"


def test_a_student_without_a_live_teacher_fails_by_name_and_leaves_nothing_live(new_taxonomy):
    run = TrainingRun.objects.create(taxonomy=new_taxonomy, kind="build", config=QUICK_STUDENT)
    run = training_run_execute(run_id=run.id)
    assert run.status == "failed" and "needs a teacher" in run.error
    assert not Deployment.objects.filter(taxonomy=new_taxonomy).exists()


@pytest.mark.parametrize(
    "distill, message",
    [({"teacher": "v3"}, "must be 'live'"), ({"epochs": 3}, "unknown distill option"),
     ({"batch_size": 1}, "batch_size"), ("yes", "must be a JSON object")],
)  # fmt: skip
def test_a_bad_distill_section_is_refused_before_any_work(distill, message):
    with pytest.raises(Exception, match=message):
        parse_model_spec({**QUICK_STUDENT, "distill": distill})


def test_a_students_fine_tune_learns_the_verdicts_without_distilling_again(new_taxonomy, curator):
    from annotations.services.review.inputs import inputs_submit
    from annotations.services.review.verdicts import judgement_create
    from models_app.training import finetune_recipe, retraining

    training_run_execute(run_id=taxonomy_model_refresh(taxonomy=new_taxonomy).id)
    run = TrainingRun.objects.create(taxonomy=new_taxonomy, kind="build", config=QUICK_STUDENT)
    student = training_run_execute(run_id=run.id).model_version
    spec = finetune_recipe.finetune_spec(student, {"training": {"max_steps": 20}})
    assert "distill" not in spec and spec["encoder"] == student.config["encoder"]
    (item,) = inputs_submit(taxonomy=new_taxonomy, texts=["Latte Artist"], source="api")
    group = item.taxonomy.groups.get(code="35-3023")
    judgement_create(review_item=item, user=curator, verdict="reassign", group=group)
    finetune = retraining.finetune_run_request(
        taxonomy=new_taxonomy, trigger="manual", config={"training": {"max_steps": 20}},
        enqueue=False,
    )  # fmt: skip
    finetune = training_run_execute(run_id=finetune.id)
    assert finetune.status in ("promoted", "rejected"), finetune.error
    assert finetune.model_version.parent == student


def test_the_pretrained_tower_as_it_comes_is_not_fine_tuned_its_verdicts_go_to_the_ranker(
    new_taxonomy, admin_client, curator, settings
):
    """On real titles a CPU fine-tune of the pretrained tower learnt nothing it could keep
    while the ranker learnt from the same verdicts: "Fine-tune now" says so and beat starts
    none; the page names what learns the verdicts."""
    settings.SIAMWEB_TRAIN_NEW_TAXONOMIES = False
    settings.SIAMWEB_RETRAIN_MIN_VERDICTS = 1
    run = training_run_execute(run_id=taxonomy_model_refresh(taxonomy=new_taxonomy).id)
    assert run.status == "succeeded"
    judge_all(new_taxonomy, curator)  # the taxonomy's own ranker is fitted on them

    response = admin_client.post(f"/models/{new_taxonomy.slug}/finetune")
    assert response.status_code == 409
    page = response.content.decode()
    assert "is the pretrained tower as it comes: verdicts are learnt by the ranker" in page
    assert retrain_due_taxonomies() == []
    assert not TrainingRun.objects.filter(taxonomy=new_taxonomy, kind="finetune").exists()
    learnt_by = page.split('data-testid="live-ranker">')[1].split("</dd>")[0]
    assert learnt_by.startswith("fresh/ranker 1, fitted on 22 verdicts, live since <time")


def test_a_trained_towers_fine_tune_asked_for_the_title_recipe_learns_by_it(new_taxonomy, curator):
    from annotations.services.review.inputs import inputs_submit
    from annotations.services.review.verdicts import judgement_create
    from models_app.training import retraining

    training_run_execute(run_id=taxonomy_model_refresh(taxonomy=new_taxonomy).id)
    quick_tower = {"encoder": {"kind": "transformer"}, "training": {"max_steps": 2}}
    run = TrainingRun.objects.create(taxonomy=new_taxonomy, kind="build", config=quick_tower)
    tower = training_run_execute(run_id=run.id).model_version
    texts = ["Latte Artist", "Travel RN - 13 weeks", "Espresso Bar Lead"]
    for item, code in zip(
        inputs_submit(taxonomy=new_taxonomy, texts=texts, source="api"),
        ["35-3023", "29-1141", "35-3023"],
        strict=True,
    ):
        group = item.taxonomy.groups.get(code=code)
        judgement_create(review_item=item, user=curator, verdict="reassign", group=group)
    asked = {"training": {"finetune_recipe": "titles", "max_steps": 6}}
    finetune = retraining.finetune_run_request(
        taxonomy=new_taxonomy, trigger="manual", config=asked, enqueue=False
    )
    finetune = training_run_execute(run_id=finetune.id)
    assert finetune.status in ("promoted", "rejected"), finetune.error
    candidate = finetune.model_version
    assert candidate.parent == tower
    assert candidate.config["training"]["finetune_recipe"] == "titles"
    assert candidate.config["training"]["batch_size"] == 64
    # Both phases trained by the title recipe, each to its share of the step cap.
    assert candidate.metrics["steps"] > 0
    assert finetune.gate_report["decision"] in ("promote", "reject")


def test_a_transient_error_after_the_run_does_not_drop_what_follows_it(new_taxonomy, monkeypatch):
    """The task is tried again; its run, claimed already, is not run twice, but the training
    it was to queue is queued all the same."""
    run = taxonomy_model_refresh(taxonomy=new_taxonomy)
    real = tasks.first_training_request
    failures = []

    def broker_gone_once(**kwargs):
        if not failures:
            failures.append(1)
            raise OperationalError("the connection dropped")
        return real(**kwargs)

    monkeypatch.setattr(tasks, "first_training_request", broker_gone_once)
    monkeypatch.setattr(tasks.execute_training_run, "retry_backoff", False)
    result = tasks.execute_training_run.apply(args=[run.id])
    assert failures and result.get() == "succeeded"
    runs = TrainingRun.objects.filter(taxonomy=new_taxonomy)
    assert runs.filter(id=run.id, status="succeeded").exists()
    queued = runs.filter(status="queued").get()
    assert (queued.kind, queued.config) == ("build", TOWER_SPEC)
