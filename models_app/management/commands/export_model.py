from __future__ import annotations

import json
import shutil
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from models_app.models import ModelVersion
from models_app.serving.engines import artifact_path
from models_app.siamese.compiled import DERIVED_FOLDERS
from models_app.training.services.builds import SHIPPED_INFO
from siamweb.taxonomy_reads import taxonomy_get


class Command(BaseCommand):
    help = (
        "Copy a model version's files and its spec, metrics and data hash into a folder, such as "
        "data/models/<slug>/ which `setup_demo` loads instead of training."
    )

    def create_parser(self, prog_name, subcommand, **kwargs):
        # Our --version names a model version; it replaces Django's "show the Django version".
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--version", type=int, required=True)
        parser.add_argument("destination", type=Path)
        parser.add_argument("--command", default="", help="the command that trained it, recorded")

    def handle(self, *args, slug, version, destination: Path, command, **options) -> None:
        taxonomy = taxonomy_get(slug)
        if taxonomy is None:
            raise CommandError(f"no taxonomy {slug!r}")
        model = ModelVersion.objects.filter(taxonomy=taxonomy, number=version).first()
        if model is None:
            raise CommandError(f"taxonomy {slug!r} has no model version {version}")
        if destination.exists() and not destination.is_dir():
            raise CommandError(f"{destination} is a file; name a folder")
        if destination.exists() and any(destination.iterdir()):
            raise CommandError(f"{destination} is not empty; remove it first")
        destination.mkdir(parents=True, exist_ok=True)
        source = artifact_path(model.artifact_path)
        for path in source.iterdir():
            # What serving wrote beside the version's files is made again wherever it loads.
            if path.name in DERIVED_FOLDERS or path.name.startswith("."):
                continue
            if path.is_dir():  # a sentence-transformers tower keeps a folder a module
                shutil.copytree(path, destination / path.name)
            else:
                shutil.copyfile(path, destination / path.name)
        info = {
            "taxonomy": slug,
            "version": model.label,
            "spec": model.config,
            "metrics": model.metrics,
            "data_sha256": model.data_sha256,
            "trained_on_members": model.trained_on_members,
            "command": command,
        }
        (destination / SHIPPED_INFO).write_text(json.dumps(info, indent=2, sort_keys=True))
        size = sum(p.stat().st_size for p in destination.rglob("*") if p.is_file())
        self.stdout.write(f"{model.label} → {destination} ({size / 1e6:.1f} MB)")
