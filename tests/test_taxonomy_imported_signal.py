"""An import asks the model's side to serve it through a signal (annotations/signals.py), so
curation never imports training: training answers with the run it queued, the kind the import's
answer reports."""

from __future__ import annotations

import pytest

from annotations.signals import QueuedRun, taxonomy_imported, taxonomy_serve_request
from models_app.models import TrainingRun
from models_app.training.services.runs import taxonomy_imported_serve


def test_a_taxonomy_without_a_model_gets_a_build_and_a_live_one_a_reindex(tiny_taxonomy):
    live = taxonomy_serve_request(taxonomy=tiny_taxonomy)
    run = TrainingRun.objects.get(id=live.id)
    assert live == QueuedRun(id=run.id, reindex=True)
    assert (run.kind, run.trigger, run.status) == ("reindex", "import", "queued")
    # One run a taxonomy at a time: asked again while it waits, nothing more is queued.
    assert taxonomy_serve_request(taxonomy=tiny_taxonomy) is None
    assert TrainingRun.objects.filter(taxonomy=tiny_taxonomy, status="queued").count() == 1

    run.delete()
    tiny_taxonomy.deployment.delete()
    tiny_taxonomy.refresh_from_db()
    first = taxonomy_serve_request(taxonomy=tiny_taxonomy)
    assert not first.reindex
    assert TrainingRun.objects.get(id=first.id).kind == "build"


def test_an_import_with_nothing_to_serve_it_is_an_error_not_a_silence(tiny_taxonomy):
    taxonomy_imported.disconnect(dispatch_uid="models_app.taxonomy_imported_serve")
    try:
        with pytest.raises(RuntimeError, match="no receiver serves imported taxonomies"):
            taxonomy_serve_request(taxonomy=tiny_taxonomy)
    finally:
        taxonomy_imported.connect(
            taxonomy_imported_serve, dispatch_uid="models_app.taxonomy_imported_serve"
        )
    assert not TrainingRun.objects.filter(taxonomy=tiny_taxonomy, trigger="import").exists()
