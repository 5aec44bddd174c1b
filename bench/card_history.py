"""What the list of a curator's last verdicts beside the review card costs as their history grows:
``recent_verdicts_and_skips`` against the query it replaced (every live verdict of the curator
numbered by a window, newest first, then cut), alternating in one run, on PostgreSQL.

O*NET with the shipped model on a scratch database; one curator's verdicts (every seventh a
skip) written straight to the table in steps of 100, 2,000 and 20,000.

    .venv/bin/python bench/card_history.py [--repeat 30]

Prints a table and writes bench/results/card_history.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _pg

_pg.scratch_database(broker="memory://")

from django.db.models import Case, F, Value, When, Window  # noqa: E402
from django.db.models.functions import RowNumber  # noqa: E402

from annotations.models import Judgement  # noqa: E402
from annotations.selectors.history import recent_verdicts_and_skips  # noqa: E402
from annotations.services.accounts import user_ensure  # noqa: E402
from annotations.services.review.inputs import inputs_submit  # noqa: E402

STEPS = (100, 2_000, 20_000)


def numbered(user, limit: int = 10, skips: int = 5) -> list[Judgement]:
    """The query before: every live verdict of the curator numbered within its kind."""
    is_skip = Case(When(verdict=Judgement.Verdict.SKIP, then=Value(1)), default=Value(0))
    newest = [F("created_at").desc(), F("id").desc()]
    return list(
        Judgement.objects.live()
        .filter(user=user)
        .select_related("review_item__input", "group", "rejected_group")
        .annotate(
            is_skip=is_skip, rank=Window(RowNumber(), partition_by=[is_skip], order_by=newest)
        )
        .filter(rank__lte=max(limit * 3, skips))
        .order_by("-created_at", "-id")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    taxonomy = _pg.onet_live()
    user, _ = user_ensure(username="bench-curator", password="bench-pass-123", admin=False)
    items = inputs_submit(taxonomy=taxonomy, texts=[f"Title {i}" for i in range(50)], source="api")
    rows, written = [], 0
    for step in STEPS:
        Judgement.objects.bulk_create(
            [
                Judgement(
                    review_item=items[i % len(items)],
                    user=user,
                    verdict="skip" if i % 7 == 0 else "confirm",
                    group=None if i % 7 == 0 else items[i % len(items)].top_group,
                )
                for i in range(written, step)
            ],
            batch_size=2_000,
        )
        written = step
        _pg.vacuum_analyze()
        timings: dict[str, list[float]] = {"numbered (before)": [], "newest of each kind": []}
        for _ in range(args.repeat):
            for name, read in (
                ("numbered (before)", lambda: numbered(user)),
                ("newest of each kind", lambda: recent_verdicts_and_skips(user=user)),
            ):
                started = time.perf_counter()
                read()
                timings[name].append((time.perf_counter() - started) * 1000)
        for name, values in timings.items():
            rows.append({"verdicts": step, "query": name,
                         "p50_ms": round(statistics.median(values), 2),
                         "p90_ms": round(_pg.percentile(values, 0.9), 2)})  # fmt: skip
    _pg.print_table(rows, ["verdicts", "query", "p50_ms", "p90_ms"])
    _pg.write_results("card_history", {"machine": _pg.machine(), "rows": rows})


if __name__ == "__main__":
    main()
