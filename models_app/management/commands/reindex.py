from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from models_app.models import TrainingRun
from models_app.training.run_execution import training_run_execute
from models_app.training.services.runs import training_run_request
from siamweb.taxonomy_reads import taxonomy_get


class Command(BaseCommand):
    help = "Re-encode every member with the live model and swap in a fresh index."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")

    def handle(self, *args, slug: str, **options) -> None:
        taxonomy = taxonomy_get(slug)
        if taxonomy is None:
            raise CommandError(f"no taxonomy {slug!r}")
        run = training_run_request(taxonomy=taxonomy, kind=TrainingRun.Kind.REINDEX, enqueue=False)
        if run is None:
            raise CommandError(f"taxonomy {slug!r} already has a run queued or running")
        executed = training_run_execute(run_id=run.id)
        if executed is None:
            run.refresh_from_db()
            raise CommandError(f"reindex run {run.id} did not run: {run.error}")
        run = executed
        if run.status != TrainingRun.Status.SUCCEEDED:
            raise CommandError(f"reindex run {run.id} failed: {run.error}")
        self.stdout.write(f"{run.index_build} live: {run.index_build.size} members")
