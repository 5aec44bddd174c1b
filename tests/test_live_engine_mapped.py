"""The live engine's big arrays are memory-mapped files, so every process on a host shares one
copy of each live model, promoted before or after it started."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
from django.conf import settings

from models_app.models import Deployment
from models_app.serving.engines import live_engine
from models_app.serving.normalize import rank_taxonomy_groups
from tests.conftest import build_live_model
from tests.test_engine_mapped import file_mapped_at, files_mapped


def test_the_live_engine_serves_from_memory_mapped_files(tiny_taxonomy):
    build = Deployment.objects.get(taxonomy=tiny_taxonomy).index_build
    index_folder = settings.SIAMWEB_ARTIFACTS_DIR / build.artifact_path
    model_folder = settings.SIAMWEB_ARTIFACTS_DIR / build.model_version.artifact_path

    engine = live_engine(tiny_taxonomy)

    assert engine.index.mapped and str(index_folder / "members.faiss") in files_mapped()
    for table in (engine.search.exact.rough, engine.search.exact.vector_of):
        assert isinstance(table, np.memmap)
        assert Path(table.filename).parent == index_folder / "exact-cosines"
    assert isinstance(engine.search.trigrams._postings, np.memmap)
    projection = file_mapped_at(engine.encoder.projection.data_ptr())
    assert projection == str(model_folder / "projection.npy")


def test_a_model_promoted_after_the_process_started_is_mapped_too(tiny_taxonomy):
    first = live_engine(tiny_taxonomy)
    build_live_model(tiny_taxonomy)  # a new version goes live
    build = Deployment.objects.get(taxonomy=tiny_taxonomy).index_build

    answer = rank_taxonomy_groups(tiny_taxonomy, ["python developer"], k=3)[0]

    engine = live_engine(tiny_taxonomy)
    assert engine is not first and answer.model_version == "jobs/v2"
    table = Path(engine.search.exact.rough.filename)
    assert table.is_relative_to(settings.SIAMWEB_ARTIFACTS_DIR / build.artifact_path)


def test_a_replaced_model_is_unmapped(tiny_taxonomy):
    """A process keeps no model it no longer serves: its pages leave the process's memory."""
    live_engine(tiny_taxonomy)
    old = Deployment.objects.get(taxonomy=tiny_taxonomy).index_build.model_version
    build_live_model(tiny_taxonomy)

    live_engine(tiny_taxonomy)
    gc.collect()

    old_projection = settings.SIAMWEB_ARTIFACTS_DIR / old.artifact_path / "projection.npy"
    assert str(old_projection) not in files_mapped()


def test_a_build_comes_with_the_tables_serving_maps(tiny_taxonomy):
    """The worker that builds an index writes its tables, so no web process computes them."""
    build = Deployment.objects.get(taxonomy=tiny_taxonomy).index_build
    folder = settings.SIAMWEB_ARTIFACTS_DIR / build.artifact_path

    assert (folder / "exact-cosines" / "manifest.json").is_file()
    assert len(list(folder.glob("trigrams-*/manifest.json"))) == 1
