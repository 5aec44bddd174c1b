from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotations.importers import ImportFileError
from annotations.services.taxonomy import ImportRejected, taxonomy_import
from annotations.signals import TaxonomyCannotServe, taxonomy_serve_request

_MAX_ERRORS_SHOWN = 50


class Command(BaseCommand):
    help = (
        "Create or update a taxonomy from a CSV, O*NET or ESCO file, all or nothing; then, as "
        "the page's import does, queue what makes it serve: the pretrained tower for a new "
        "taxonomy (its training follows), a reindex for one with a live model."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug", help="taxonomy identifier, e.g. onet")
        parser.add_argument("path", type=Path, help="CSV/ESCO file, or the O*NET folder")
        parser.add_argument("--format", choices=["csv", "onet", "esco"], default="csv")
        parser.add_argument("--name", help="display name (default: the slug)")
        parser.add_argument(
            "--skip-bad-rows",
            action="store_true",
            help="import the good rows and report the bad ones, instead of rejecting the file",
        )
        parser.add_argument(
            "--no-model",
            action="store_true",
            help="import only: queue no model run (serve it later with `train`)",
        )

    def handle(
        self, *args, slug: str, path: Path, format: str, name, skip_bad_rows, no_model, **options
    ):
        try:
            report = taxonomy_import(
                slug=slug, path=path, fmt=format, name=name, skip_bad_rows=skip_bad_rows
            )
        except ImportFileError as exc:
            raise CommandError(str(exc)) from None
        except ImportRejected as exc:
            for error in exc.errors[:_MAX_ERRORS_SHOWN]:
                self.stderr.write(f"  {error}")
            if len(exc.errors) > _MAX_ERRORS_SHOWN:
                self.stderr.write(f"  … and {len(exc.errors) - _MAX_ERRORS_SHOWN} more")
            raise CommandError(f"{exc} (use --skip-bad-rows to import the rest)") from None
        for error in report.skipped_rows[:_MAX_ERRORS_SHOWN]:
            self.stderr.write(f"  skipped {error}")
        self.stdout.write(report.summary())
        if no_model:
            return
        try:
            run = taxonomy_serve_request(taxonomy=report.taxonomy)
        except TaxonomyCannotServe as exc:
            self.stdout.write(f"nothing queued: {exc}")
            return
        if run is None:
            self.stdout.write(f"{slug} already has a run queued or running; nothing more queued")
        elif run.reindex:
            self.stdout.write(f"queued run #{run.id}: a reindex of {slug}'s live model")
        else:
            self.stdout.write(
                f"queued run #{run.id}: {slug} serves with the pretrained model once a worker has "
                "encoded its members (minutes); training on its strings follows"
            )
