from __future__ import annotations

from django.apps import AppConfig


class ModelsAppConfig(AppConfig):
    name = "models_app"
    verbose_name = "Models and indexes"
