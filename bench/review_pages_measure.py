"""Timing a page for bench/review_pages.py: its server time over many requests, and the plan of
every SELECT it runs (EXPLAIN ANALYZE), with the sequential scans of big tables."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import connection
from django.template import TemplateDoesNotExist
from django.urls import NoReverseMatch

from bench import _pg

BIG_TABLES = (
    "annotations_reviewitem",
    "annotations_prediction",
    "annotations_input",
    "annotations_judgement",
    "annotations_member",
    "annotations_auditevent",
    "annotations_feedbackpair",
)
# A page's slowest query gets its plan printed from this execution time up.
SLOW_QUERY_MS = 5.0


@dataclass
class Page:
    name: str
    row: dict[str, object] = field(default_factory=dict)
    selects: list[str] = field(default_factory=list)
    # (sql, execution ms, big tables read by a sequential scan, text plan) of each SELECT
    plans: list[tuple[str, float, list[str], str]] = field(default_factory=list)


def measure(
    name: str,
    request: Callable[[], object],
    *,
    repeat: int,
    before: Callable[[], None] | None = None,
    check: Callable[[object], str | None] | None = None,
) -> Page:
    """Time ``request`` ``repeat`` times (``before`` runs untimed ahead of each); the SQL of one
    extra, untimed run is kept for the plans."""
    page = Page(name)
    try:
        if before:
            before()
        with _pg.QueryRecorder().recording() as queries:
            response = request()
    except (NoReverseMatch, TemplateDoesNotExist) as exc:
        page.row = {"page": name, "status": "not built", "note": f"{type(exc).__name__}: {exc}"}
        print(f"{name}: not built ({exc})")
        return page
    except Exception as exc:  # a page half-built by someone else: report it, go on
        page.row = {"page": name, "status": "error", "note": f"{type(exc).__name__}: {exc}"}
        print(f"{name}: error: {exc!r}")
        return page
    if response.status_code >= 400:
        page.row = {"page": name, "status": response.status_code, "note": "refused"}
        print(f"{name}: HTTP {response.status_code}: {response.content[:500]!r}")
        return page
    page.selects = queries.selects()
    timings = []
    for _ in range(repeat):
        if before:
            before()
        response, timing = _pg.timed(request)
        assert response.status_code < 400, (name, response.status_code)
        timings.append(timing)
    page.row = {
        "page": name,
        "status": response.status_code,
        **_pg.summary(timings),
        "queries": len(queries.statements),
        "kb": round(len(response.content) / 1024, 1),
        "note": check(response) if check else None,
    }
    # Explained now, while the tables are as the page saw them (later pages change them).
    page.plans = [(sql, *plan(sql)) for sql in page.selects]
    if page.plans:
        page.row["slowest_query_ms"] = round(max(ms for _, ms, _, _ in page.plans), 2)
    return page


def plan(sql: str) -> tuple[float, list[str], str]:
    """(execution ms, big tables read by a sequential scan, the text plan) of one SELECT."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}")
        lines = [row[0] for row in cursor.fetchall()]
    text = "\n".join(lines)
    found = re.search(r"Execution Time: ([\d.]+) ms", text)
    scans = sorted({table for table in BIG_TABLES if re.search(rf"Seq Scan on {table}\b", text)})
    return float(found.group(1)) if found else 0.0, scans, text


def after_link(content: bytes) -> str | None:
    found = re.search(rb'href="([^"]*[?&](?:amp;)?after=[^"]*)"', content)
    return html.unescape(found.group(1).decode()) if found else None
