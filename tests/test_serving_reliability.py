"""Serving while curators work: a swap is loaded once per process while the old engine keeps
answering, and a body no parser can take is a 400, not a 500."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from annotations.models import Taxonomy
from annotations.services.taxonomy import taxonomy_import
from models_app.serving import engines
from models_app.serving.engines import live_engine
from models_app.training.run_execution import training_run_execute
from models_app.training.services.runs import training_run_request
from tests.conftest import TINY_CSV, build_live_model

THREADS = 8


@pytest.mark.django_db(transaction=True)
def test_a_swap_is_loaded_once_while_the_old_engine_keeps_serving(monkeypatch):
    taxonomy = taxonomy_import(slug="swap", path=TINY_CSV, fmt="csv").taxonomy
    build_live_model(taxonomy)
    old = live_engine(taxonomy)
    run = training_run_request(taxonomy=taxonomy, kind="reindex", enqueue=False)
    training_run_execute(run_id=run.id)  # the deployment moves to a new index build

    loads, started, release = [], threading.Event(), threading.Event()
    real_load = engines._load_engine

    def slow_load(taxonomy, build):
        loads.append(build.id)
        started.set()
        release.wait(10)  # every other thread asks while this one loads
        return real_load(taxonomy, build)

    monkeypatch.setattr(engines, "_load_engine", slow_load)
    answers: list = [None] * THREADS

    def ask(slot: int) -> None:
        try:
            answers[slot] = live_engine(Taxonomy.objects.get(id=taxonomy.id))
        finally:
            connection.close()

    loader = threading.Thread(target=ask, args=(0,))
    loader.start()
    assert started.wait(10)
    others = [threading.Thread(target=ask, args=(i,)) for i in range(1, THREADS)]
    for thread in others:
        thread.start()
    for thread in others:
        thread.join(10)
    # Each asked during the load and was answered at once, by the engine it had.
    assert all(answer is old for answer in answers[1:])
    release.set()
    loader.join(10)
    assert len(loads) == 1
    new = answers[0]
    assert new is not old and new.index_build_id != old.index_build_id
    assert live_engine(taxonomy) is new and len(loads) == 1


@pytest.mark.parametrize(
    "url",
    ["/api/v1/taxonomies/jobs/normalize", "/api/v1/judgements", "/api/v1/taxonomies/jobs/inputs"],
)
def test_json_nested_too_deeply_is_a_400_on_every_json_endpoint(api_client, tiny_taxonomy, url):
    body = '{"texts": ' + "[" * 5000 + "]" * 5000 + "}"
    response = api_client.post(url, body, content_type="application/json")
    assert response.status_code == 400
    assert "nested too deeply" in response.json()["detail"]


def test_an_id_past_any_database_integer_is_a_400_naming_the_field(api_client, tiny_taxonomy):
    response = api_client.get("/api/v1/judgements", {"review_item": "9" * 24})
    assert response.status_code == 400
    assert "review_item" in response.json()


def test_an_oversized_id_in_a_body_is_a_400_not_a_500(api_client, tiny_taxonomy):
    response = api_client.post(
        "/api/v1/judgements", {"review_item": 10**30, "verdict": "confirm"}, format="json"
    )
    assert response.status_code == 400
