"""train, evaluate, reindex and export_model, as an admin runs them."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotations.models import Taxonomy
from models_app.models import Deployment, ModelVersion, TrainingRun
from models_app.serving.engines import artifact_path
from models_app.serving.normalize import rank_taxonomy_groups
from models_app.siamese.encoders import load_encoder
from tests.conftest import build_live_model

SPEC = {
    "encoder": {"kind": "ngram_bag", "buckets": 1024, "embedding_dim": 16, "output_dim": 16},
    "training": {"batch_size": 8, "max_steps": 20, "eval_every": 10, "threads": 1},
}


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.fixture
def spec_file(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(SPEC))
    return path


def test_train_leaves_a_version_with_its_config_and_metrics(tiny_taxonomy, spec_file):
    out = run("train", "jobs", "--config", str(spec_file))
    assert "jobs/v2: ngram_bag, 21 members indexed" in out
    assert "not live" in out
    version = ModelVersion.objects.get(number=2)
    assert version.config["encoder"]["buckets"] == 1024
    assert version.config["training"]["max_steps"] == 20
    assert version.metrics["steps"] == 20.0
    assert version.metrics["device"] == "cpu"
    assert 0 <= version.metrics["suite"]["mean_accuracy"] <= 1
    assert {"typos/accuracy", "composition/accuracy", "extra_words/accuracy"} <= set(
        version.metrics["suite"]
    )
    assert Deployment.objects.get().index_build.model_version.number == 1


def test_train_activate_makes_it_live_and_from_fine_tunes(tiny_taxonomy, spec_file):
    run("train", "jobs", "--config", str(spec_file), "--activate")
    assert Deployment.objects.get().index_build.model_version.number == 2
    out = run("train", "jobs", "--from", "2", "--activate")
    child = ModelVersion.objects.get(number=3)
    assert child.parent.number == 2
    assert child.config == ModelVersion.objects.get(number=2).config  # the parent's spec
    assert "jobs/v3" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train", "nope"], "no taxonomy 'nope'"),
        (["train", "jobs", "--from", "9"], "no model version 9"),
        (["evaluate", "jobs", "--version", "9"], "no model version 9"),
        (["evaluate", "jobs", "--size", "1"], "--size must be between"),
        (["reindex", "nope"], "no taxonomy 'nope'"),
    ],
)
def test_commands_refuse_unknown_things(tiny_taxonomy, args, message):
    with pytest.raises(CommandError, match=message):
        run(*args)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{oops", "cannot read config"),
        (json.dumps({"encoder": {"kind": "gpt"}}), "unknown encoder kind"),
        (json.dumps({"training": {"loss": "sdml", "batch_size": 0}}), "batch_size must be"),
    ],
)
def test_a_bad_spec_is_refused_before_any_run(tiny_taxonomy, tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(CommandError, match=message):
        run("train", "jobs", "--config", str(path))
    assert TrainingRun.objects.count() == 1  # the fixture's, nothing new


def test_fine_tuning_with_an_incompatible_spec_fails_and_leaves_the_live_model(
    tiny_taxonomy, spec_file, tmp_path
):
    run("train", "jobs", "--config", str(spec_file), "--activate")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**SPEC, "encoder": {**SPEC["encoder"], "output_dim": 8}}))
    with pytest.raises(CommandError, match="another encoder config"):
        run("train", "jobs", "--from", "2", "--config", str(other), "--activate")
    assert Deployment.objects.get().index_build.model_version.number == 2


def test_training_an_empty_taxonomy_is_a_clear_error(db):
    Taxonomy.objects.create(slug="empty", name="Empty")
    with pytest.raises(CommandError, match="no member strings to train on"):
        run("train", "empty")


def test_evaluate_prints_and_stores_the_suite(tiny_taxonomy):
    out = run("evaluate", "jobs")
    metrics = json.loads(out.split("\n", 1)[1])
    assert metrics["typos/n"] > 0
    assert ModelVersion.objects.get().metrics["suite"] == metrics


def test_export_writes_the_model_and_its_record(tiny_taxonomy, tmp_path):
    out = run("export_model", "jobs", "--version", "1", str(tmp_path / "m"), "--command", "x y")
    assert "jobs/v1 →" in out
    info = json.loads((tmp_path / "m" / "shipped.json").read_text())
    assert (info["version"], info["command"]) == ("jobs/v1", "x y")
    assert (tmp_path / "m" / "manifest.json").exists()
    with pytest.raises(CommandError, match="not empty"):
        run("export_model", "jobs", "--version", "1", str(tmp_path / "m"))


def test_a_corrupt_live_index_is_a_clear_error_not_a_silent_fallback(tiny_taxonomy, api_client):
    build = Deployment.objects.get().index_build
    (artifact_path(build.artifact_path) / "members.faiss").write_bytes(b"garbage")
    response = api_client.post(
        "/api/v1/taxonomies/jobs/normalize", {"texts": ["nurse"]}, format="json"
    )
    assert response.status_code == 503
    assert "cannot be loaded" in response.json()["detail"]
    assert Deployment.objects.get().index_build_id == build.id


def test_a_model_that_served_exports_without_what_serving_wrote_beside_it(tiny_taxonomy, tmp_path):
    spec = {
        "encoder": {"kind": "ngram_bag", "buckets": 1024, "embedding_dim": 16, "output_dim": 16},
        "training": {"batch_size": 8, "max_steps": 20, "eval_every": 10, "threads": 1},
    }
    version = build_live_model(tiny_taxonomy, spec).model_version
    rank_taxonomy_groups(tiny_taxonomy, ["java developer"], k=1)  # loads it: mapped weights
    assert (artifact_path(version.artifact_path) / "mapped-weights").is_dir()

    run("export_model", "jobs", "--version", str(version.number), str(tmp_path / "m"))

    assert not (tmp_path / "m" / "mapped-weights").exists()
    exported = load_encoder(tmp_path / "m")
    assert exported.encode(["java developer"]).shape == (1, 16)
    (tmp_path / "file").write_text("x")
    with pytest.raises(CommandError, match="is a file; name a folder"):
        run("export_model", "jobs", "--version", "1", str(tmp_path / "file"))
