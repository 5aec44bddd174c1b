from __future__ import annotations

import json
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotations.selectors import taxonomy_get
from models_app.models import TrainingRun
from models_app.services import training_run_execute, training_run_request
from models_app.siamese.encoders import ConfigError, parse_config


class Command(BaseCommand):
    help = "Fit a model on a taxonomy's members and build its index, in this process."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--config", type=Path, help="JSON file with the encoder config")
        parser.add_argument("--activate", action="store_true", help="make the result live")

    def handle(self, *args, slug: str, config: Path | None, activate: bool, **options) -> None:
        taxonomy = taxonomy_get(slug)
        if taxonomy is None:
            raise CommandError(f"no taxonomy {slug!r}")
        encoder_config = {}
        if config is not None:
            try:
                encoder_config = json.loads(config.read_text())
            except (OSError, ValueError) as exc:
                raise CommandError(f"cannot read config {config}: {exc}") from None
            if not isinstance(encoder_config, dict):
                raise CommandError(f"{config} must hold a JSON object")
        try:
            parse_config(encoder_config)
        except ConfigError as exc:
            raise CommandError(f"bad config: {exc}") from None
        run = training_run_request(
            taxonomy=taxonomy,
            kind=TrainingRun.Kind.BUILD,
            config=encoder_config,
            activate=activate,
            enqueue=False,
        )
        if run is None:
            raise CommandError(f"taxonomy {slug!r} already has a run queued or running")
        started = time.perf_counter()
        run = training_run_execute(run_id=run.id)
        if run.status != TrainingRun.Status.SUCCEEDED:
            raise CommandError(f"training run {run.id} failed: {run.error}")
        self.stdout.write(
            f"{run.model_version.label}: {run.model_version.encoder_kind}, "
            f"{run.index_build.size} members indexed in {time.perf_counter() - started:.1f}s"
            + (" — live" if activate else " — not live (use --activate)")
        )
