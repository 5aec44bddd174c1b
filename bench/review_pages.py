"""Server time of the review pages with 100,000 pending inputs on PostgreSQL.

Seeds O*NET with the shipped model live and 100,000 pending inputs, each with a prediction and a
review item (bulk inserts; groups drawn with a Zipf skew, ranked groups from the taxonomy's own
related occupations, scores from real predictions of realistic inputs) and a history of 20,000
items already confirmed by the ten curators over 30 days, runs VACUUM ANALYZE, then times each
page many times through Django's test client with logged-in curators (wall time around the
call, in this process: server time with no network; and the CPU time of this thread in it):

- GET /review/ (the card): a fresh claim past other curators' leases, and a reload;
- GET /review/?taxonomy=onet&group=<code>: the card narrowed to the biggest group;
- POST /review/items/<id>/judge (htmx): a verdict and the next card, at this queue size;
- GET /review/progress/: the counter the panel asks for once swapped in (open, done, today);
- GET /review/queue/: the first page and a deep page reached through its ``after=`` links;
- GET /review/batch/onet/: groups with the most pending items;
- GET /review/batch/onet/<code>/ for the biggest group, and POST of that batch.

A page whose URL name does not resolve yet is reported as "not built". Every SELECT a page runs
is then run again under EXPLAIN ANALYZE, right after that page is timed: the slowest per page,
and any sequential scan of a big table, are printed, with the full plans of the card's claim
query, the batch-groups count and each page's slowest query when it takes 5 ms or more.

    .venv/bin/python bench/review_pages.py [--items 100000] [--done 20000] [--repeat 50]
        [--deep-pages 1000]

Scratch PostgreSQL database (siamweb_bench_<pid>, dropped at exit), Celery's in-memory broker.
Prints a table and writes bench/results/review_pages.json. The queue is seeded by
bench/review_pages_seed.py, each page timed and explained by bench/review_pages_measure.py.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _pg

_pg.scratch_database(broker="memory://")

from django.test import Client  # noqa: E402
from django.urls import reverse  # noqa: E402
from django.utils import timezone  # noqa: E402

from annotations.models import Group, ReviewItem  # noqa: E402
from annotations.services.accounts import user_ensure  # noqa: E402
from bench.review_pages_measure import SLOW_QUERY_MS, Page, after_link, measure  # noqa: E402
from bench.review_pages_seed import seed_queue  # noqa: E402

CURATORS = 10


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=100_000, help="pending items")
    parser.add_argument(
        "--done", type=int, default=20_000, help="items already judged, the team's history"
    )
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--deep-pages", type=int, default=1000)
    args = parser.parse_args()
    load_before = _pg.load_average()

    taxonomy = _pg.onet_live()
    curators = []
    for number in range(CURATORS):
        user, _ = user_ensure(
            username=f"bench-curator-{number}", password="bench-pass-123", admin=False
        )
        client = Client(HTTP_HOST="localhost")
        client.force_login(user)
        curators.append((user, client))
    started = timezone.now()
    seeded = seed_queue(
        taxonomy, args.items, done=args.done, curators=[user for user, _ in curators]
    )
    seeded["seed_seconds"] = round((timezone.now() - started).total_seconds(), 1)
    print(f"seeded: {seeded}")
    big = Group.objects.get(taxonomy=taxonomy, code=seeded["biggest_group"])
    user, client = curators[0]
    # The other curators hold the cards at the top of the queue, as on a busy day.
    for _other, other_client in curators[1:]:
        other_client.get(reverse("review"))

    def release_own_lease() -> None:
        ReviewItem.objects.filter(leased_by=user).update(leased_by=None, lease_expires_at=None)

    def held_card() -> ReviewItem | None:
        return ReviewItem.objects.filter(leased_by=user).select_related("prediction").first()

    def card_in_group(response) -> str | None:
        card = held_card()
        if card is None:
            return "no card"
        if card.top_group_id != big.id:
            return "filter not applied: the card is from another group"
        return None

    pages: list[Page] = []
    pages.append(
        measure(
            "GET /review/ (card, fresh claim)",
            lambda: client.get(reverse("review")),
            repeat=args.repeat,
            before=release_own_lease,
        )
    )
    pages.append(
        measure(
            "GET /review/ (card, reload)", lambda: client.get(reverse("review")), repeat=args.repeat
        )
    )
    group_url = f"{reverse('review')}?taxonomy={taxonomy.slug}&group={big.code}"
    pages.append(
        measure(
            "GET /review/?taxonomy=onet&group=<biggest>",
            lambda: client.get(group_url),
            repeat=args.repeat,
            before=release_own_lease,
            check=card_in_group,
        )
    )

    verdict: dict[str, object] = {}

    def next_verdict() -> None:
        card = held_card()
        if card is None:
            client.get(reverse("review"))
            card = held_card()
        verdict["url"] = reverse("review-item-judge", args=[card.id])
        verdict["data"] = {
            "verdict": "confirm",
            "group_code": card.prediction.ranked_groups[0]["code"],
            "prediction_id": card.prediction_id,
        }

    release_own_lease()
    client.get(reverse("review"))
    pages.append(
        measure(
            "POST /review/items/<id>/judge (htmx)",
            lambda: client.post(verdict["url"], verdict["data"], HTTP_HX_REQUEST="true"),
            repeat=args.repeat,
            before=next_verdict,
        )
    )

    pages.append(
        measure(
            "GET /review/progress/ (htmx, asked for after each card)",
            lambda: client.get(reverse("review-progress"), HTTP_HX_REQUEST="true"),
            repeat=args.repeat,
        )
    )

    queue_url: list[str] = []

    def queue_first():
        queue_url[:] = [reverse("review-queue")]
        return client.get(queue_url[0])

    pages.append(measure("GET /review/queue/ (first page)", queue_first, repeat=args.repeat))
    deep_note = None
    if pages[-1].row.get("status") != "not built":
        url, depth = reverse("review-queue"), 0
        for _ in range(args.deep_pages):
            link = after_link(client.get(url).content)
            if link is None:
                break
            url = link if link.startswith("/") else f"{reverse('review-queue')}{link}"
            depth += 1
        deep_note = f"{depth} pages deep"
        if depth == 0:
            deep_note = "no after= link on the first page"
        pages.append(
            measure(
                "GET /review/queue/?after=… (deep page)",
                lambda: client.get(url),
                repeat=args.repeat,
                check=lambda _response: deep_note,
            )
        )

    pages.append(
        measure(
            "GET /review/batch/onet/ (groups)",
            lambda: client.get(reverse("review-batch-groups", args=[taxonomy.slug])),
            repeat=args.repeat,
        )
    )
    batch_url = []

    def batch_page():
        batch_url[:] = [reverse("review-batch", args=[taxonomy.slug, big.code])]
        return client.get(batch_url[0])

    pages.append(measure("GET /review/batch/onet/<biggest>/", batch_page, repeat=args.repeat))
    if batch_url:
        pages.append(batch_post_page(client, batch_url[0], repeat=max(5, args.repeat // 5)))

    # --- plans --------------------------------------------------------------------------------
    findings = []
    full_plans = {}
    for page in pages:
        for sql, ms, scans, _text in page.plans:
            if scans:
                findings.append({"page": page.name, "seq_scan_on": scans, "ms": ms, "sql": sql})
        if page.name.startswith("GET /review/ (card, fresh"):
            claims = [
                (sql, text)
                for sql, _, _, text in page.plans
                if '"leased_by_id" IS NULL' in sql and "LIMIT 1" in sql and "reviewitem" in sql
            ]
            for number, (sql, text) in enumerate(claims, start=1):
                full_plans[f"card claim, pass {number}"] = (sql, text)
        if page.name.startswith("GET /review/batch/onet/ (groups)"):
            grouped = [
                (sql, text)
                for sql, _, _, text in page.plans
                if "GROUP BY" in sql and "reviewitem" in sql
            ]
            if grouped:
                full_plans["batch groups aggregation"] = grouped[0]
        if page.plans:
            sql, ms, _, text = max(page.plans, key=lambda planned: planned[1])
            if ms >= SLOW_QUERY_MS and sql not in {known for known, _ in full_plans.values()}:
                full_plans[f"{page.name}: slowest query"] = (sql, text)
    for name, (sql, text) in full_plans.items():
        print(f"\n--- {name} ---\n{sql}\n{text}")
    for finding in findings:
        print(
            f"\nSEQ SCAN on {finding['seq_scan_on']} in {finding['page']} "
            f"({finding['ms']:.1f} ms):\n{finding['sql'][:600]}"
        )

    load_after = _pg.load_average()
    machine = _pg.machine()
    rows = [page.row for page in pages]
    print(f"\nmachine: {machine}")
    print(f"load average before / after: {load_before} / {load_after}")
    _pg.print_table(
        rows,
        [
            "page",
            "status",
            "n",
            "p50_ms",
            "p99_ms",
            "max_ms",
            "cpu_p50_ms",
            "queries",
            "slowest_query_ms",
            "kb",
        ],
    )
    for row in rows:
        if row.get("note"):
            print(f"note: {row['page']}: {row['note']}")
    target = 200.0
    measured = [row for row in rows if isinstance(row.get("p99_ms"), float)]
    met = all(row["p99_ms"] <= target for row in measured)
    missing = [row["page"] for row in rows if row.get("status") == "not built"]
    print(
        f"target: queue and batch pages ≤ {target:.0f} ms with {args.items:,} pending: "
        f"{'met' if met else 'NOT met'} on the pages measured"
        + (f"; not built yet: {', '.join(missing)}" if missing else "")
    )
    _pg.write_results(
        "review_pages",
        {
            "machine": machine,
            "load_average_before": load_before,
            "load_average_after": load_after,
            "broker": "memory://",
            "seeded": seeded,
            "curators_holding_cards": CURATORS - 1,
            "target_ms": target,
            "target_met_on_measured_pages": met,
            "not_built": missing,
            "rows": rows,
            "seq_scans": findings,
            "plans": {name: {"sql": sql, "plan": text} for name, (sql, text) in full_plans.items()},
        },
    )


def batch_post_page(client: Client, url: str, *, repeat: int) -> Page:
    """POST the batch form as the browser does (htmx): about one tile in ten marked a false
    match, the rest confirmed; the response is the next batch, whose tiles the next POST
    judges."""
    rng = random.Random(9)
    shown: list[list[str]] = [re.findall(r'name="item" value="(\d+)"', client.get(url).text)]

    def post():
        items = shown[0]
        reject = [item for item in items if rng.random() < 0.1]
        response = client.post(url, {"item": items, "reject": reject}, HTTP_HX_REQUEST="true")
        shown[0] = re.findall(r'name="item" value="(\d+)"', response.text)
        return response

    page = measure("POST /review/batch/onet/<biggest>/ (confirm the rest)", post, repeat=repeat)
    if page.row.get("status") == 200:
        page.row["note"] = f"{len(shown[0])} tiles a batch"
    return page


if __name__ == "__main__":
    main()
