from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from models_app.models import ModelVersion
from models_app.serving.engines import live_engine
from models_app.training.services.builds import model_version_evaluate
from siamweb.taxonomy_reads import taxonomy_get


class Command(BaseCommand):
    help = (
        "Evaluate a model version on the paper's four tests built from the taxonomy (typos, "
        "composition, extra words, held-out curator annotations); stores and prints the metrics."
    )

    def create_parser(self, prog_name, subcommand, **kwargs):
        # Our --version names a model version; it replaces Django's "show the Django version".
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--version", type=int, help="version number (default: the live one)")
        parser.add_argument("--size", type=int, default=1000, help="queries per test set")

    def handle(self, *args, slug, version, size, **options) -> None:
        taxonomy = taxonomy_get(slug)
        if taxonomy is None:
            raise CommandError(f"no taxonomy {slug!r}")
        if not 10 <= size <= 100_000:
            raise CommandError("--size must be between 10 and 100000")
        if version is None:
            engine = live_engine(taxonomy)
            if engine is None:
                raise CommandError(f"taxonomy {slug!r} has no live model; pass --version")
            model_version = ModelVersion.objects.get(id=engine.model_version_id)
        else:
            model_version = ModelVersion.objects.filter(taxonomy=taxonomy, number=version).first()
            if model_version is None:
                raise CommandError(f"taxonomy {slug!r} has no model version {version}")
        metrics = model_version_evaluate(model_version=model_version, size=size)
        self.stdout.write(f"{model_version.label}")
        self.stdout.write(json.dumps(metrics, indent=2, sort_keys=True))
