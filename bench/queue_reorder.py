"""What ordering the review queue again costs a fast worker after a new ranker, with 100,000
open items: ``review_items_reorder`` (the items of the queue's head and those ordered longest
ago, up to ``SIAMWEB_REORDER_MAX_ITEMS``, ranked again and written in one statement), how many
reorders go round the whole queue, and one reorder of every open item at once.

O*NET with the shipped model on a scratch PostgreSQL database; the open items are the demo's
inputs and O*NET alternate titles as job ads write them (``bench/_pg.realistic_inputs``).

    .venv/bin/python bench/queue_reorder.py [--items 100000] [--repeat 3]

Prints a table and writes bench/results/queue_reorder.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import _pg  # noqa: E402

_pg.scratch_database(broker="memory://")

from django.conf import settings  # noqa: E402

from annotations.models import ReviewItem  # noqa: E402
from annotations.services.review.inputs import inputs_submit  # noqa: E402
from annotations.services.review.queue_order import review_items_reorder  # noqa: E402

OUT = ROOT / "bench" / "results" / "queue_reorder.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    settings.SIAMWEB_REVIEW_PENDING_PER_USER = args.items * 2  # one sender queues them all
    taxonomy = _pg.onet_live()
    texts = _pg.realistic_inputs(args.items)
    started = time.perf_counter()
    for start in range(0, len(texts), 2000):
        inputs_submit(taxonomy=taxonomy, texts=texts[start : start + 2000], source="api")
    open_items = ReviewItem.objects.filter(taxonomy=taxonomy, status="pending").count()
    print(f"{open_items} open items queued in {time.perf_counter() - started:.0f} s", flush=True)
    _pg.vacuum_analyze()
    seconds, ordered = [], []
    for _ in range(args.repeat):
        started = time.perf_counter()
        ordered.append(review_items_reorder(taxonomy=taxonomy))
        seconds.append(time.perf_counter() - started)
        print(f"  ordered {ordered[-1]} items in {seconds[-1]:.1f} s", flush=True)
    started = time.perf_counter()
    whole = review_items_reorder(taxonomy=taxonomy, limit=open_items)
    whole_seconds = time.perf_counter() - started
    print(f"  ordered all {whole} items at once in {whole_seconds:.1f} s", flush=True)
    report = {
        "machine": _pg.machine(),
        "open_items": open_items,
        "max_items_a_reorder": settings.SIAMWEB_REORDER_MAX_ITEMS,
        "seconds": [round(s, 1) for s in seconds],
        "median_seconds": round(statistics.median(seconds), 1),
        "items_ordered": ordered,
        "reorders_round_the_queue": -(-open_items // settings.SIAMWEB_REORDER_MAX_ITEMS),
        "whole_queue_at_once_seconds": round(whole_seconds, 1),
        "whole_queue_items_ordered": whole,
        "whole_queue_items_per_second": round(whole / whole_seconds),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2))
    for key, value in report.items():
        print(f"{key:28} {value}")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
