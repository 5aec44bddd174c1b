"""A memory-mapped file of a new live build missing or truncated on this host: a clear error for
that taxonomy, while a process that holds the previous engine keeps serving it; nothing
crashes, and the build loads once the file is mended."""

from __future__ import annotations

import gc
import shutil
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings

from annotations.services.taxonomy import taxonomy_import
from models_app.models import Deployment
from models_app.serving import engines
from models_app.serving.engines import (
    artifact_path,
    forget_loaded_engines,
    live_engine,
    preload_live_engines,
)
from models_app.serving.normalize import rank_taxonomy_groups
from models_app.siamese.artifacts import ArtifactError
from models_app.training.run_execution import training_run_execute
from models_app.training.services.runs import training_run_request
from tests.conftest import TINY_CSV, build_live_model, forget_serving

URL = "/api/v1/taxonomies/jobs/normalize"


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def new_build_folder(taxonomy) -> Path:
    """A reindex makes a new build live, as a worker's does on another host."""
    run = training_run_request(taxonomy=taxonomy, kind="reindex", enqueue=False)
    training_run_execute(run_id=run.id)
    build = Deployment.objects.get(taxonomy=taxonomy).index_build
    return settings.SIAMWEB_ARTIFACTS_DIR / build.artifact_path


def one_file(folder: Path, pattern: str) -> Path:
    (path,) = folder.glob(pattern)
    return path


DAMAGES = [
    ("exact-cosines/vector_of.npy", truncate, "is truncated"),
    ("exact-cosines/rough.npy", Path.unlink, "is missing"),
    ("trigrams-*/postings.npy", truncate, "is truncated"),
    ("trigrams-*/vocabulary.npy", Path.unlink, "is missing"),
    ("members.faiss", truncate, "is truncated or corrupt"),
    ("members.faiss", Path.unlink, "is missing"),
]


@pytest.mark.parametrize(("pattern", "damage", "said"), DAMAGES)
def test_the_engine_a_process_holds_keeps_serving_when_the_new_build_is_damaged(
    tiny_taxonomy, pattern, damage, said, caplog, monkeypatch
):
    old = live_engine(tiny_taxonomy)
    damaged = one_file(new_build_folder(tiny_taxonomy), pattern)
    damage(damaged)
    loads = []
    real_load = engines._load_engine
    monkeypatch.setattr(engines, "_load_engine", lambda *a: loads.append(1) or real_load(*a))

    answers = [rank_taxonomy_groups(tiny_taxonomy, ["java developer"], k=3)[0] for _ in range(3)]

    assert live_engine(tiny_taxonomy) is old
    assert all(answer.groups for answer in answers)
    assert f"{damaged.name} {said}" in caplog.text and "jobs/v1 keeps serving" in caplog.text
    assert len(loads) == 1  # tried once, not on every request


@pytest.mark.parametrize(("pattern", "damage", "said"), DAMAGES[:4])
def test_a_process_without_an_engine_answers_503_naming_the_file(
    api_client, tiny_taxonomy, pattern, damage, said
):
    damaged = one_file(new_build_folder(tiny_taxonomy), pattern)
    forget_loaded_engines()  # a web process on another host, started now
    damage(damaged)

    response = api_client.post(URL, {"texts": ["java developer"]}, format="json")

    assert response.status_code == 503
    assert f"{damaged.name} {said}" in response.json()["detail"]
    with pytest.raises(ArtifactError, match=said):
        live_engine(tiny_taxonomy)


def test_a_truncated_weights_file_of_a_new_model_leaves_the_old_one_serving(tiny_taxonomy, caplog):
    old = live_engine(tiny_taxonomy)
    build_live_model(tiny_taxonomy)  # jobs/v2, loaded by the worker in this very process
    version = Deployment.objects.get(taxonomy=tiny_taxonomy).index_build.model_version
    with engines._lock:  # as a process on another host: v2 never loaded here
        engines._encoders.clear()
    gc.collect()
    truncate(settings.SIAMWEB_ARTIFACTS_DIR / version.artifact_path / "projection.npy")

    answer = rank_taxonomy_groups(tiny_taxonomy, ["java developer"], k=3)[0]

    assert answer.model_version == "jobs/v1" and live_engine(tiny_taxonomy) is old
    assert "encoder files in" in caplog.text and "jobs/v1 keeps serving" in caplog.text


def test_a_mended_build_is_loaded_on_the_next_try(tiny_taxonomy, monkeypatch):
    monkeypatch.setattr(engines, "_LOAD_RETRY", 0.0)
    old = live_engine(tiny_taxonomy)
    folder = new_build_folder(tiny_taxonomy)
    truncate(folder / "exact-cosines" / "rough.npy")
    assert live_engine(tiny_taxonomy) is old

    shutil.rmtree(folder / "exact-cosines")  # as the error says: written again on the next load

    engine = live_engine(tiny_taxonomy)
    assert engine is not old and engine.index_build_id != old.index_build_id
    assert (folder / "exact-cosines" / "rough.npy").is_file()


NEURAL_SPEC = {
    "encoder": {"kind": "ngram_bag", "buckets": 1024, "embedding_dim": 16, "output_dim": 16},
    "training": {"batch_size": 8, "max_steps": 20, "eval_every": 10, "threads": 1},
}
GIT_LFS_POINTER = (
    b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"a" * 64 + b"\nsize 9\n"
)


@pytest.fixture
def neural_taxonomy(db):
    report = taxonomy_import(slug="jobs", path=TINY_CSV, fmt="csv", name="Tiny jobs")
    build_live_model(report.taxonomy, NEURAL_SPEC)
    return report.taxonomy


@pytest.mark.parametrize("content", [b"", b"x", GIT_LFS_POINTER, b"<html>Not found</html>"])
def test_a_weights_file_damaged_any_way_is_a_503_naming_it_and_never_stops_a_preload(
    api_client, neural_taxonomy, content
):
    """torch's unpickler raises EOFError, UnpicklingError or IndexError on such files: each is
    the artifact's fault, answered as one, and a web server's preload before it forks (which
    any exception would stop) reports it and goes on."""
    version = Deployment.objects.get(taxonomy=neural_taxonomy).index_build.model_version
    folder = artifact_path(version.artifact_path)
    shutil.rmtree(folder / "mapped-weights", ignore_errors=True)
    (folder / "weights.pt").write_bytes(content)
    forget_serving()  # a web process started now

    response = api_client.post(URL, {"texts": ["java developer"]}, format="json")

    assert response.status_code == 503
    assert "are unreadable" in response.json()["detail"]
    forget_serving()
    (said,) = preload_live_engines().values()
    assert said.startswith("not loaded: ArtifactError") and "are unreadable" in said


def test_a_damaged_description_cache_is_encoded_again_not_a_500(api_client, tiny_taxonomy):
    assert api_client.post(URL, {"texts": ["java developer"]}, format="json").status_code == 200
    version = Deployment.objects.get(taxonomy=tiny_taxonomy).index_build.model_version
    (cache,) = artifact_path("jobs/descriptions").glob(f"{version.id}.npz")
    cache.write_bytes(cache.read_bytes()[:40])  # a zip cut short: BadZipFile
    forget_serving()

    response = api_client.post(URL, {"texts": ["java developer"]}, format="json")

    assert response.status_code == 200
    assert response.json()["results"][0]["groups"]
    with np.load(cache) as stored:  # written anew
        assert len(stored["keys"]) > 0
