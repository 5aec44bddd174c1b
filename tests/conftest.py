from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.models import Taxonomy
from annotations.services.accounts import user_ensure
from annotations.services.taxonomy import taxonomy_import
from models_app.models import TrainingRun
from models_app.serving.engines import forget_loaded_engines
from models_app.serving.group_search import forget_group_search
from models_app.serving.groups import forget_group_facts
from models_app.serving.rankers import forget_loaded_rankers
from models_app.serving.reads import forget_verdict_states
from models_app.siamese.ranker import files as ranker_files
from models_app.training.run_execution import training_run_execute
from models_app.training.services.runs import training_run_request

FIXTURES = Path(__file__).parent / "fixtures"
TINY_CSV = FIXTURES / "tiny_taxonomy.csv"
# Small enough to fit in milliseconds; the tiny taxonomy has only a few hundred n-grams.
TINY_MODEL = {"encoder": {"kind": "char_ngram_tfidf", "dim": 32, "min_df": 1}}


@pytest.fixture(autouse=True)
def _isolated_artifacts(settings, tmp_path):
    settings.SIAMWEB_ARTIFACTS_DIR = tmp_path / "artifacts"
    forget_serving()
    yield
    forget_serving()


@pytest.fixture(autouse=True)
def _empty_cache():
    """The throttles count in the default cache (per process in tests): no test inherits another's
    invalid tokens or calls."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def without_starter(tmp_path, monkeypatch):
    """The shipped starter ranker missing: the hand prior ranks, with no probability, until
    the taxonomy's own ranker is fitted (what serves when the starter cannot be read)."""
    monkeypatch.setattr(ranker_files, "STARTER_FILE", tmp_path / "no-starter.json")
    ranker_files.cold_start_ranker.cache_clear()
    yield
    ranker_files.cold_start_ranker.cache_clear()


def forget_serving() -> None:
    forget_loaded_engines()
    forget_loaded_rankers()
    forget_group_facts()
    forget_group_search()
    forget_verdict_states()


def build_live_model(taxonomy: Taxonomy, config: dict | None = None) -> TrainingRun:
    run = training_run_request(
        taxonomy=taxonomy, kind=TrainingRun.Kind.BUILD, config=config or TINY_MODEL, enqueue=False
    )
    assert run is not None
    run = training_run_execute(run_id=run.id)
    assert run.status == TrainingRun.Status.SUCCEEDED, run.error
    return run


@pytest.fixture
def tiny_taxonomy(db) -> Taxonomy:
    """A five-group taxonomy with a live model and index."""
    report = taxonomy_import(slug="jobs", path=TINY_CSV, fmt="csv", name="Tiny jobs")
    build_live_model(report.taxonomy)
    return report.taxonomy


@pytest.fixture
def curator(db):
    user, _ = user_ensure(username="carla", password="carla-pass-123", admin=False)
    return user


@pytest.fixture
def other_curator(db):
    user, _ = user_ensure(username="oscar", password="oscar-pass-123", admin=False)
    return user


@pytest.fixture
def admin_user(db):
    user, _ = user_ensure(username="ada", password="ada-pass-123", admin=True)
    return user


@pytest.fixture
def api_client(curator) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=curator)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def user_model():
    return get_user_model()


def one_verdict(taxonomy: Taxonomy, user, text: str = "Midwife", code: str = "29-1141") -> None:
    """A curator puts ``text`` in group ``code``: one verdict new to the live model."""
    from annotations.models import Group
    from annotations.services.review.inputs import inputs_submit
    from annotations.services.review.verdicts import judgement_create

    (item,) = inputs_submit(taxonomy=taxonomy, texts=[text], source="api")
    gold = Group.objects.get(taxonomy=taxonomy, code=code)
    verdict = "confirm" if item.top_group_id == gold.id else "reassign"
    judgement_create(review_item=item, user=user, verdict=verdict, group=gold)
