from __future__ import annotations

from django.apps import AppConfig


class ModelsAppConfig(AppConfig):
    name = "models_app"
    verbose_name = "Models and indexes"

    def ready(self) -> None:
        # Curation announces an import; training queues the run that serves it
        # (annotations/signals.py), so curation never imports training.
        from annotations.signals import taxonomy_imported
        from models_app.training.services.runs import taxonomy_imported_serve

        taxonomy_imported.connect(
            taxonomy_imported_serve, dispatch_uid="models_app.taxonomy_imported_serve"
        )
