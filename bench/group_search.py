"""Server time of the review card's reassign search on O*NET and on ESCO, and what it finds.

Imports the bundled O*NET taxonomy with the shipped model live, and ESCO (``../shared/data/esco``
or ``--data``) with the same shipped model made live for it (an n-gram encoder of job titles: it
encodes any taxonomy's texts; ESCO gets no model of its own here), submits one input to each so
there is a card, logs a curator in with Django's test client and asks the search the way the
card's type-ahead does: GET /review/items/<id>/groups?q=<query>, the htmx fragment of result
buttons. Each query is what a curator types (abbreviations, a title, a word being typed, a code,
a misspelling, a common word matching hundreds of groups), asked ``--repeat`` times after one
warm-up; the figure is wall time around the test client's call, in this process: server time
with no network. The first search after the live build changed (the words of every member are
read then) is timed apart. For the queries whose group is plain, the rank it is found at.

    .venv/bin/python bench/group_search.py [--database postgres|sqlite] [--repeat 20]
        [--data ../shared/data] [--results bench/results/group_search_<database>.json]

postgres: a scratch database (siamweb_bench_<pid>, dropped at exit); sqlite: a file in a scratch
folder, `make run`'s database. Celery's in-memory broker. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _pg  # no Django yet: the database is chosen first

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "data" / "models" / "onet"
SHARED_DATA = ROOT.parent / "shared" / "data"

# What curators type, by the kind of query; each with the group a curator means where one is
# plainly meant (the name, as the result button shows it).
ONET_QUERIES: list[tuple[str, str, str | None]] = [
    ("abbreviation", "RN", "Registered Nurses"),
    (
        "abbreviation",
        "HVAC tech",
        "Heating, Air Conditioning, and Refrigeration Mechanics and Installers",
    ),
    ("abbreviation", "UX designer", "Web and Digital Interface Designers"),
    ("abbreviation", "LPN", "Licensed Practical and Licensed Vocational Nurses"),
    ("abbreviation", "CNA", "Nursing Assistants"),
    ("abbreviation", "CFO", "Chief Executives"),
    ("abbreviation", "DBA", "Database Administrators"),
    ("name", "registered nurse", "Registered Nurses"),
    ("name", "truck driv", "Heavy and Tractor-Trailer Truck Drivers"),
    ("name", "barista", "Baristas"),
    ("name", "software developer", "Software Developers"),
    ("member title", "python developer", "Software Developers"),
    ("member title", "forklift", "Industrial Truck and Tractor Operators"),
    ("code", "29-1141", "Registered Nurses"),
    ("code", "15-12", None),
    ("misspelling", "acountant", "Accountants and Auditors"),
    ("misspelling", "electrician helpr", "Helpers--Electricians"),
    ("common word", "manager", None),
    ("common word", "engineer", None),
    ("common word", "assistant", None),
    ("a word being typed", "nur", None),
    ("a word being typed", "a", None),
    ("meaning", "coffee maker", "Baristas"),
    ("meaning", "lorry driver", "Heavy and Tractor-Trailer Truck Drivers"),
]
ESCO_QUERIES: list[tuple[str, str, str | None]] = [
    ("abbreviation", "RN", None),
    # ESCO files "HR manager" as a title of human resources officer, not of the manager.
    ("abbreviation", "HR manager", "human resources officer"),
    ("abbreviation", "UX designer", "user interface designer"),
    ("abbreviation", "ICT", None),
    ("name", "registered nurse", "nurse responsible for general care"),
    ("name", "software developer", "software developer"),
    ("name", "barista", "barista"),
    ("member title", "forklift", "forklift operator"),
    ("misspelling", "acountant", "accountant"),
    ("common word", "manager", None),
    ("common word", "technician", None),
    ("common word", "operator", None),
    ("a word being typed", "nur", None),
    ("a word being typed", "a", None),
    ("meaning", "coffee maker", "barista"),
    ("member title", "lorry driver", "cargo vehicle driver"),
]

RESULT_NAME = '<span class="name">([^<]+)</span>'


def sqlite_database() -> str:
    """A SQLite file in a scratch folder, migrated, as `make run` has it."""
    scratch = tempfile.mkdtemp(prefix="siamweb-bench-")
    url = f"sqlite:///{scratch}/siamweb.sqlite3"
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "siamweb.settings",
            "SIAMWEB_VAR_DIR": scratch,
            "DATABASE_URL": url,
            "CELERY_BROKER_URL": "memory://",
            "LOG_LEVEL": "WARNING",
        }
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    print(f"scratch SQLite database {url}")
    return url


def live_taxonomy(slug: str, path: Path, fmt: str):
    from annotations.services.taxonomy import taxonomy_import
    from models_app.training.run_execution import taxonomy_ensure_live

    # ESCO has a few descriptions with tabs and stray C1 characters, which the text rules refuse:
    # those occupations are left out, and counted.
    report = taxonomy_import(slug=slug, path=path, fmt=fmt, skip_bad_rows=True)
    done = taxonomy_ensure_live(taxonomy=report.taxonomy, shipped=SHIPPED)
    skipped = (
        f", {len(report.skipped_rows)} rows refused and left out" if report.skipped_rows else ""
    )
    print(f"{slug}: {report.members_created:,} members{skipped}, {done}")
    return report.taxonomy


def measure(client, item_id: int, queries, repeat: int) -> tuple[list[dict], list[float], float]:
    """Per query its times and what it found; every call's time; the first call's."""
    import re

    url = f"/review/items/{item_id}/groups"
    _, first = _pg.timed(lambda: client.get(url, {"q": queries[0][1]}))
    rows, every = [], []
    for kind, query, meant in queries:
        response = client.get(url, {"q": query})  # warm-up: this query's own first call
        assert response.status_code == 200, response.status_code
        calls = []
        for _ in range(repeat):
            response, timing = _pg.timed(lambda q=query: client.get(url, {"q": q}))
            calls.append(timing.wall_ms)
        every += calls
        found = [html.unescape(n) for n in re.findall(RESULT_NAME, response.content.decode())]
        rows.append(
            {
                "kind": kind,
                "query": query,
                "meant": meant,
                "rank": found.index(meant) + 1 if meant in found else None,
                "first": found[:3],
                "p50_ms": statistics.median(calls),
                "p95_ms": _pg.percentile(calls, 0.95),
            }
        )
    return rows, every, first.wall_ms


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--results", type=Path)
    args = parser.parse_args()
    results_path = args.results or ROOT / f"bench/results/group_search_{args.database}.json"
    if args.database == "postgres":
        _pg.scratch_database(broker="memory://")
    else:
        sqlite_database()
    from django.test import Client

    from annotations.services.accounts import user_ensure
    from annotations.services.review.inputs import inputs_submit

    load_before = _pg.load_average()
    taxonomies = [
        (live_taxonomy("onet", ROOT / "data" / "onet", "onet"), ONET_QUERIES),
        (live_taxonomy("esco", args.data / "esco", "esco"), ESCO_QUERIES),
    ]
    if args.database == "postgres":
        _pg.vacuum_analyze()
    user, _ = user_ensure(username="bench-curator", password="bench-pass-123", admin=False)
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    results: dict = {
        "command": " ".join(["bench/group_search.py", *sys.argv[1:]]),
        "database": args.database,
        "machine": _pg.machine(),
        "repeat": args.repeat,
        "taxonomies": {},
    }
    started = time.perf_counter()
    for taxonomy, queries in taxonomies:
        (item,) = inputs_submit(taxonomy=taxonomy, texts=["Senior staff member"], source="api")
        rows, every, first_ms = measure(client, item.id, queries, args.repeat)
        summary = {
            "calls": len(every),
            "p50_ms": statistics.median(every),
            "p95_ms": _pg.percentile(every, 0.95),
            "max_ms": max(every),
            "first_search_ms": first_ms,
            "found_first": sum(row["rank"] == 1 for row in rows if row["meant"]),
            "with_a_plain_group": sum(bool(row["meant"]) for row in rows),
        }
        results["taxonomies"][taxonomy.slug] = {"summary": summary, "queries": rows}
        print(
            f"\n{taxonomy.slug} on {args.database}: p50 {summary['p50_ms']:.0f} ms, "
            f"p95 {summary['p95_ms']:.0f} ms, max {summary['max_ms']:.0f} ms over "
            f"{summary['calls']} calls; first search {first_ms:.0f} ms; the group meant first "
            f"for {summary['found_first']} of {summary['with_a_plain_group']}"
        )
        print(f"{'query':<20} {'p50 ms':>7} {'p95 ms':>7} {'rank':>5}  first found")
        for row in rows:
            rank = "—" if row["rank"] is None else str(row["rank"])
            first = " | ".join(row["first"])[:72]
            print(
                f"{row['query']:<20} {row['p50_ms']:>7.1f} {row['p95_ms']:>7.1f} {rank:>5}  {first}"
            )
    results["seconds"] = round(time.perf_counter() - started, 1)
    results["load_average"] = {"before": load_before, "after": _pg.load_average()}
    results_path.parent.mkdir(parents=True, exist_ok=True)
    results_path.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {results_path}")


if __name__ == "__main__":
    main()
