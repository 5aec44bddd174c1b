"""Loading every taxonomy's live engine up front (a web server's master before it forks)."""

from __future__ import annotations

import shutil

from django.conf import settings

from annotations.services.taxonomy import taxonomy_import
from models_app.models import Deployment, ModelVersion
from models_app.serving.engines import preload_live_engines
from models_app.serving.normalize import rank_taxonomy_groups
from tests.conftest import TINY_CSV, build_live_model


def test_preload_loads_each_live_engine_so_requests_need_no_files(tiny_taxonomy):
    taxonomy_import(slug="empty", path=TINY_CSV, fmt="csv", name="No model yet")
    label = ModelVersion.objects.get(taxonomy=tiny_taxonomy).label

    loaded = preload_live_engines()

    assert loaded == {"jobs": label}  # a taxonomy with no live model is not listed
    # Loaded into memory: answering needs the artifacts no more.
    shutil.rmtree(settings.SIAMWEB_ARTIFACTS_DIR)
    answer = rank_taxonomy_groups(tiny_taxonomy, ["python developer"], k=3)[0]
    assert answer.model_version == label
    assert answer.groups


def test_preload_reports_an_unloadable_engine_and_loads_the_others(tiny_taxonomy, db):
    other = taxonomy_import(slug="other", path=TINY_CSV, fmt="csv", name="Other").taxonomy
    build_live_model(other)
    broken = Deployment.objects.get(taxonomy=tiny_taxonomy).index_build
    (settings.SIAMWEB_ARTIFACTS_DIR / broken.artifact_path).joinpath("manifest.json").write_text(
        "{not json"
    )

    loaded = preload_live_engines()

    assert loaded["jobs"].startswith("not loaded: ")
    assert loaded["other"] == ModelVersion.objects.get(taxonomy=other).label
