from __future__ import annotations

import json
import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from annotations.text_rule import TextError, clean_text
from models_app.serving.engines import SERVING_UNAVAILABLE
from models_app.serving.normalize import rank_taxonomy_groups
from siamweb.taxonomy_reads import taxonomy_get

_BATCH = 512


class Command(BaseCommand):
    help = "Normalize texts read from standard input, one per line; prints one JSON line each."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--k", type=int, default=settings.SIAMWEB_DEFAULT_K)

    def handle(self, *args, slug: str, k: int, **options) -> None:
        if not 1 <= k <= settings.SIAMWEB_MAX_K:
            raise CommandError(f"--k must be between 1 and {settings.SIAMWEB_MAX_K}")
        taxonomy = taxonomy_get(slug)
        if taxonomy is None:
            raise CommandError(f"no taxonomy {slug!r}")
        try:
            raw = sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CommandError(f"standard input is not UTF-8 (byte {exc.start})") from None
        texts, errors = [], []
        for number, line in enumerate(raw.splitlines(), start=1):
            try:
                texts.append(clean_text(line, max_length=settings.SIAMWEB_MAX_TEXT_LENGTH))
            except TextError as exc:
                errors.append(f"line {number}: text {exc}")
        if errors:
            for error in errors[:50]:
                self.stderr.write(error)
            raise CommandError(f"{len(errors)} bad line(s); nothing was normalized")
        try:
            for start in range(0, len(texts), _BATCH):
                for result in rank_taxonomy_groups(taxonomy, texts[start : start + _BATCH], k=k):
                    self.stdout.write(json.dumps(result.as_dict(), ensure_ascii=False))
        except SERVING_UNAVAILABLE as exc:
            raise CommandError(str(exc)) from None
