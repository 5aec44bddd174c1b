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
from annotations.services.review import inputs_submit
from annotations.services.taxonomy import ImportRejected, taxonomy_import
from models_app.models import ModelVersion, TrainingRun
from models_app.services import (
    deployment_activate,
    index_build_create,
    model_version_import,
    taxonomy_needs_reindex,
    training_run_execute,
    training_run_request,
)
from models_app.siamese.text import clean_text

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
        self.model_spec = json.loads(config.read_text()) if config else {}
        started = time.perf_counter()
        try:
            report = taxonomy_import(
                slug=DEMO_SLUG, path=data / "onet", fmt="onet", name="O*NET 27.0 occupations"
            )
        except (ImportFileError, ImportRejected) as exc:
            raise CommandError(f"bundled O*NET import failed: {exc}") from None
        self.stdout.write(report.summary())
        taxonomy = report.taxonomy
        self._ensure_live_model(taxonomy, data / "models" / DEMO_SLUG)
        self._ensure_users()
        self._ensure_inputs(taxonomy, data / "demo_inputs.txt")
        self.stdout.write(f"setup done in {time.perf_counter() - started:.1f}s")

    def _run(self, taxonomy: Taxonomy, kind: str) -> None:
        run = training_run_request(
            taxonomy=taxonomy, kind=kind, config=self.model_spec, enqueue=False
        )
        if run is None:
            self.stdout.write(f"{taxonomy.slug}: a run is already active; leaving it to finish")
            return
        run = training_run_execute(run_id=run.id)
        if run.status != TrainingRun.Status.SUCCEEDED:
            raise CommandError(f"{kind} of {taxonomy.slug} failed: {run.error}")
        self.stdout.write(f"{taxonomy.slug}: {kind} → {run.index_build} ({run.index_build.size})")

    def _ensure_live_model(self, taxonomy: Taxonomy, shipped: Path) -> None:
        if not hasattr(taxonomy, "deployment"):
            if ModelVersion.objects.filter(taxonomy=taxonomy).exists():
                self._run(taxonomy, TrainingRun.Kind.REINDEX)
            elif shipped.exists() and not self.model_spec:
                version = model_version_import(taxonomy=taxonomy, folder=shipped)
                build = index_build_create(model_version=version)
                deployment_activate(index_build=build)
                self.stdout.write(f"{taxonomy.slug}: shipped model {version.label} is live")
            else:
                self.stdout.write(f"{taxonomy.slug}: training the first model (about a minute)")
                self._run(taxonomy, TrainingRun.Kind.BUILD)
        elif taxonomy_needs_reindex(taxonomy):
            self._run(taxonomy, TrainingRun.Kind.REINDEX)
        else:
            self.stdout.write(f"{taxonomy.slug}: live model and index are up to date")

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
