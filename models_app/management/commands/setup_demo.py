from __future__ import annotations

import json
import os
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from annotations.importers import ImportFileError
from annotations.models import Input, Taxonomy
from annotations.services.accounts import user_ensure
from annotations.services.review.inputs import inputs_submit
from annotations.services.taxonomy import ImportRejected, taxonomy_import
from annotations.text_rule import clean_text
from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.configs import ConfigError
from models_app.training.run_execution import taxonomy_ensure_live

DEMO_SLUG = "onet"


class Command(BaseCommand):
    help = (
        "Make the product usable on a fresh database: import the bundled O*NET taxonomy, "
        "build its model and index, create demo users and queue sample inputs. Safe to repeat."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--data-dir",
            type=Path,
            default=settings.BASE_DIR / "data",
            help="folder with onet/ and demo_inputs.txt (default: the bundled data)",
        )
        parser.add_argument(
            "--config",
            type=Path,
            help="JSON encoder config for the first model (default: built-in)",
        )

    def handle(self, *args, data_dir: Path, config: Path | None, **options) -> None:
        data = data_dir
        try:
            self.model_spec = json.loads(config.read_text()) if config else {}
        except (OSError, ValueError) as exc:
            raise CommandError(f"cannot read config {config}: {exc}") from None
        started = time.perf_counter()
        try:
            report = taxonomy_import(
                slug=DEMO_SLUG, path=data / "onet", fmt="onet", name="O*NET 27.0 occupations"
            )
        except (ImportFileError, ImportRejected) as exc:
            raise CommandError(f"bundled O*NET import failed: {exc}") from None
        self.stdout.write(report.summary())
        taxonomy = report.taxonomy
        try:
            done = taxonomy_ensure_live(
                taxonomy=taxonomy, shipped=data / "models" / DEMO_SLUG, spec=self.model_spec
            )
        except (ConfigError, ArtifactError, RuntimeError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{taxonomy.slug}: {done}")
        self._ensure_users()
        self._ensure_inputs(taxonomy, data / "demo_inputs.txt")
        self.stdout.write(f"setup done in {time.perf_counter() - started:.1f}s")

    def _ensure_users(self) -> None:
        for role, admin in (("admin", True), ("curator", False)):
            username = os.environ.get(f"SIAMWEB_DEMO_{role.upper()}_USER", role)
            explicit = os.environ.get(f"SIAMWEB_DEMO_{role.upper()}_PASSWORD")
            password = explicit or f"{role}-demo"
            _, created = user_ensure(
                username=username, password=password, admin=admin, reset_password=bool(explicit)
            )
            if created or explicit:
                self.stdout.write(f"{role}: username {username!r}, password {password!r}")
            else:
                self.stdout.write(f"{role}: username {username!r} (password unchanged)")

    def _ensure_inputs(self, taxonomy: Taxonomy, path) -> None:
        if Input.objects.filter(taxonomy=taxonomy).exists():
            return
        limit = settings.SIAMWEB_MAX_TEXT_LENGTH
        texts = [
            clean_text(line, max_length=limit)
            for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
        items = inputs_submit(taxonomy=taxonomy, texts=texts, source=Input.Source.DEMO)
        self.stdout.write(f"{taxonomy.slug}: {len(items)} sample inputs queued for review")
