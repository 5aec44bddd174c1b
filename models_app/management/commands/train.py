from __future__ import annotations

import json
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from models_app.models import ModelVersion, TrainingRun
from models_app.siamese.configs import ConfigError
from models_app.siamese.specs import NAMED_SPECS, parse_model_spec
from models_app.training.run_execution import training_run_execute
from models_app.training.services.runs import training_run_request
from siamweb.taxonomy_reads import taxonomy_get


class Command(BaseCommand):
    help = (
        "Train a model on a taxonomy's members (and its curators' feedback), build its index, "
        "evaluate it; in this process. Every run leaves a model version with metrics and config."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument(
            "--config",
            type=Path,
            help='JSON model spec: {"encoder": {...}, "training": {...}} (default: built-in)',
        )
        parser.add_argument(
            "--spec",
            choices=sorted(NAMED_SPECS),
            help="a built-in spec by name: pretrained (the tower as it comes, no training), "
            "tower (the tower trained on the taxonomy), default (TF-IDF n-grams, seconds)",
        )
        parser.add_argument(
            "--from",
            dest="parent",
            type=int,
            metavar="VERSION",
            help="fine-tune this version's weights (its number, e.g. 3) instead of starting fresh",
        )
        parser.add_argument("--activate", action="store_true", help="make the result live")

    def handle(self, *args, slug, config, spec, parent, activate, **options) -> None:
        taxonomy = taxonomy_get(slug)
        if taxonomy is None:
            raise CommandError(f"no taxonomy {slug!r}")
        if config is not None and spec is not None:
            raise CommandError("give --config or --spec, not both")
        spec = NAMED_SPECS[spec] if spec is not None else {}
        if config is not None:
            try:
                spec = json.loads(config.read_text())
            except (OSError, ValueError) as exc:
                raise CommandError(f"cannot read config {config}: {exc}") from None
        try:
            parse_model_spec(spec)
        except ConfigError as exc:
            raise CommandError(f"bad config {config}: {exc}") from None
        parent_version = None
        if parent is not None:
            parent_version = ModelVersion.objects.filter(taxonomy=taxonomy, number=parent).first()
            if parent_version is None:
                raise CommandError(f"taxonomy {slug!r} has no model version {parent}")
        run = training_run_request(
            taxonomy=taxonomy,
            kind=TrainingRun.Kind.BUILD,
            config=spec,
            activate=activate,
            parent_version=parent_version,
            enqueue=False,
        )
        if run is None:
            raise CommandError(f"taxonomy {slug!r} already has a run queued or running")
        started = time.perf_counter()
        run = training_run_execute(run_id=run.id)
        if run.status != TrainingRun.Status.SUCCEEDED:
            raise CommandError(f"training run {run.id} failed: {run.error}")
        version = run.model_version
        self.stdout.write(
            f"{version.label}: {version.encoder_kind}, {run.index_build.size} members indexed, "
            f"{time.perf_counter() - started:.1f}s"
            + (" — live" if activate else " — not live (use --activate)")
        )
        self.stdout.write(json.dumps(version.metrics, indent=2, sort_keys=True))
