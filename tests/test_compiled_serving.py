"""A taxonomy served by the tower encodes through the compiled copy the worker wrote when the
version was stored; with that copy missing, stale or damaged every request is still answered
(by PyTorch, one log line), the worker is asked to compile it again, and once it has, the web
process serves the new copy without a restart."""

from __future__ import annotations

import logging
import shutil

import pytest

from annotations.services.taxonomy import taxonomy_import
from models_app.models import Deployment
from models_app.serving import engines
from models_app.serving.engines import artifact_path
from models_app.siamese.compiled import COMPILED_FOLDER
from models_app.training.run_execution import training_run_execute
from models_app.training.services.runs import taxonomy_model_refresh
from siamweb import task_names
from tests.conftest import TINY_CSV, forget_serving
from worker import tasks

API = "/api/v1/taxonomies/fresh/normalize"


@pytest.fixture
def tower_taxonomy(db):
    taxonomy = taxonomy_import(slug="fresh", path=TINY_CSV, fmt="csv", name="Fresh").taxonomy
    run = training_run_execute(run_id=taxonomy_model_refresh(taxonomy=taxonomy).id)
    assert run.status == "succeeded", run.error
    return taxonomy


def live_version(taxonomy):
    return Deployment.objects.get(taxonomy=taxonomy).index_build.model_version


def normalize(api_client, text="RN night shift"):
    response = api_client.post(API, {"texts": [text]}, format="json")
    assert response.status_code == 200, response.content
    return response.json()["results"][0]["groups"][0]["name"]


def test_a_stored_tower_is_compiled_by_the_worker_and_served_compiled(tower_taxonomy, api_client):
    version = live_version(tower_taxonomy)
    assert (artifact_path(version.artifact_path) / COMPILED_FOLDER / "model.onnx").is_file()
    assert normalize(api_client) == "Registered Nurses"
    assert engines.encoder_for(version).runtime == "onnxruntime"


def damage(folder):
    model = folder / COMPILED_FOLDER / "model.onnx"
    model.write_bytes(model.read_bytes()[: model.stat().st_size // 2])


@pytest.mark.parametrize("how", ["missing", "damaged"])
def test_a_compiled_copy_that_cannot_serve_answers_every_request_and_is_compiled_again(
    tower_taxonomy, api_client, monkeypatch, caplog, how
):
    version = live_version(tower_taxonomy)
    folder = artifact_path(version.artifact_path)
    if how == "missing":
        shutil.rmtree(folder / COMPILED_FOLDER)
    else:
        damage(folder)
    forget_serving()  # a process started since: it loads the version as it is now
    sent = []
    monkeypatch.setattr(
        engines.current_app, "send_task", lambda name, args, **_: sent.append((name, *args))
    )
    with caplog.at_level(logging.WARNING):
        answers = [normalize(api_client) for _ in range(3)]
    assert answers == ["Registered Nurses"] * 3
    served = engines.encoder_for(version)
    assert served.runtime == "pytorch"
    said = [r for r in caplog.records if "PyTorch encodes" in r.getMessage()]
    assert len(said) == 1 and str(folder) in said[0].getMessage()
    assert sent == [(task_names.COMPILE_MODEL_VERSION, version.id)]

    assert tasks.compile_model_version.run(version.id) is True  # the worker
    served.compiled.recheck_seconds = 0.0  # look now, not a minute later
    assert normalize(api_client) == "Registered Nurses"
    assert served.runtime == "onnxruntime"
    assert tasks.compile_model_version.run(version.id) is False  # current: nothing to do


def test_a_broker_away_does_not_fail_the_request(tower_taxonomy, api_client, monkeypatch, caplog):
    version = live_version(tower_taxonomy)
    shutil.rmtree(artifact_path(version.artifact_path) / COMPILED_FOLDER)
    forget_serving()

    def refuse(*args, **kwargs):
        raise ConnectionRefusedError("broker away")

    monkeypatch.setattr(engines.current_app, "send_task", refuse)
    with caplog.at_level(logging.WARNING):
        assert normalize(api_client) == "Registered Nurses"
    assert "was not asked to compile it: broker away" in caplog.text
