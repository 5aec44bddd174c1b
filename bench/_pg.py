"""A scratch PostgreSQL database with O*NET and the shipped model live, for the curator-workflow
benchmarks (verdict_speed, review_pages, api_load).

``scratch_database()`` must run before anything imports Django models: it creates
``siamweb_bench_<pid>`` on the server named by ``BENCH_POSTGRES_URL`` (default: the local
``postgres`` superuser), points ``DATABASE_URL`` at it, sets up Django, migrates, and drops the
database again when the process exits (normally, on an error, Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import platform
import random
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_SERVER_URL = "postgres://postgres:postgres@127.0.0.1:5432/postgres"
_scratch_url: str | None = None


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


def _admin_execute(server_url: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(_with_database(server_url, "postgres"), autocommit=True) as conn:
        conn.execute(statement)


def scratch_database(*, broker: str = "memory://") -> str:
    """Create a scratch database, set the environment for it, set up Django and migrate.

    Returns the database's URL (for a server process started by the caller). The Celery broker
    defaults to the in-memory transport: a task the services send goes nowhere slow.
    """
    global _scratch_url
    if _scratch_url is not None:  # one per process, whichever script asks first
        return _scratch_url
    server_url = os.environ.get("BENCH_POSTGRES_URL", DEFAULT_SERVER_URL)
    name = f"siamweb_bench_{os.getpid()}"
    url = _with_database(server_url, name)
    scratch = tempfile.mkdtemp(prefix="siamweb-bench-")
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "siamweb.settings",
            "SIAMWEB_VAR_DIR": scratch,
            "DATABASE_URL": url,
            "CELERY_BROKER_URL": broker,
            "LOG_LEVEL": "WARNING",
        }
    )
    _admin_execute(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _admin_execute(server_url, f'CREATE DATABASE "{name}"')

    def drop() -> None:
        # Django may not be set up yet (the failure was before it): nothing to close then.
        with contextlib.suppress(Exception):
            from django.db import connections

            connections.close_all()
        _admin_execute(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        print(f"dropped scratch database {name}")

    atexit.register(drop)
    # SIGTERM would skip atexit; turn it into an ordinary exit so the database is dropped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    print(f"scratch database {name} (dropped at exit), broker {broker}")
    _scratch_url = url
    return url


def onet_live(model: Path = ROOT / "data" / "models" / "onet"):
    """Import the bundled O*NET taxonomy and make a saved model live (the shipped one unless
    another folder is named); returns the taxonomy."""
    from annotations.services.taxonomy import taxonomy_import
    from models_app.training.run_execution import taxonomy_ensure_live

    started = time.perf_counter()
    report = taxonomy_import(slug="onet", path=ROOT / "data" / "onet", fmt="onet")
    done = taxonomy_ensure_live(taxonomy=report.taxonomy, shipped=model)
    print(
        f"O*NET: {report.members_created:,} members, {done} ({time.perf_counter() - started:.1f} s)"
    )
    vacuum_analyze()
    return report.taxonomy


def vacuum_analyze() -> None:
    """Fresh planner statistics and visibility maps, as autovacuum leaves them a minute or so
    after a bulk load. Right after one, with none, PostgreSQL plans e.g. the live index's
    "members newer than the build" lookup as a scan of every member (5 ms, not 0.01 ms)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def demo_inputs() -> list[str]:
    lines = (ROOT / "data" / "demo_inputs.txt").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip()]


def realistic_inputs(count: int, *, seed: int = 11) -> list[str]:
    """The demo inputs, then O*NET alternate titles as job ads write them, a third with typos."""
    from bench.onet_data import onet_members
    from models_app.siamese.augment.extra_words import ExtraWords
    from models_app.siamese.augment.typos import add_typos_exact

    rng = random.Random(seed)
    texts = list(dict.fromkeys(demo_inputs()))[:count]
    members, _codes = onet_members()
    words = ExtraWords("train")
    seen = {text.casefold() for text in texts}
    while len(texts) < count:
        _group, title = rng.choice(members)
        text = words.decorate(title, rng) if rng.random() < 0.8 else title
        if rng.random() < 0.33:
            text = add_typos_exact(text, rng)
        text = text[:200]
        if text.casefold() not in seen:
            seen.add(text.casefold())
            texts.append(text)
    return texts


# --- measurements ---------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Timing(NamedTuple):
    """One call: its wall time, and the CPU time this thread spent in it (the Django side of
    server time; the rest is PostgreSQL's work and waiting, for the database or for a core)."""

    wall_ms: float
    cpu_ms: float


def summary(timings: Sequence[Timing | float]) -> dict[str, float]:
    wall = [t.wall_ms if isinstance(t, Timing) else t for t in timings]
    row = {
        "n": len(wall),
        "p50_ms": statistics.median(wall),
        "p99_ms": percentile(wall, 0.99),
        "max_ms": max(wall),
    }
    cpu = [t.cpu_ms for t in timings if isinstance(t, Timing)]
    if cpu:
        row["cpu_p50_ms"] = statistics.median(cpu)
        row["cpu_p99_ms"] = percentile(cpu, 0.99)
    return row


def timed(call) -> tuple[object, Timing]:
    """(what ``call()`` returned, its wall and thread CPU time in ms)."""
    cpu_started, started = time.thread_time(), time.perf_counter()
    result = call()
    return result, Timing(
        (time.perf_counter() - started) * 1000, (time.thread_time() - cpu_started) * 1000
    )


class QueryRecorder:
    """Every SQL statement run while active, with its parameters bound in (runnable as is).

    An execute wrapper rather than Django's query log, which each request clears.
    """

    def __init__(self) -> None:
        self.statements: list[str] = []

    def __call__(self, execute, sql, params, many, context):
        from django.db import connection

        bound = sql if params is None or many else connection.ops.compose_sql(sql, params)
        self.statements.append(bound)
        return execute(sql, params, many, context)

    @contextlib.contextmanager
    def recording(self):
        from django.db import connection

        with connection.execute_wrapper(self):
            yield self

    def selects(self) -> list[str]:
        return [sql for sql in self.statements if sql.lstrip().upper().startswith("SELECT")]


def machine() -> dict[str, object]:
    """What the figures were measured on, and how busy it was when they were."""
    cpu = platform.processor() or platform.machine()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    memory_gb = None
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            memory_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    description: dict[str, object] = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": memory_gb,
        "python": platform.python_version(),
    }
    with contextlib.suppress(Exception):  # no database: leave the version out
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            description["postgresql"] = cursor.fetchone()[0]
            # The floor under every query: one round trip to the server on loopback.
            trips = []
            for _ in range(200):
                started = time.perf_counter()
                cursor.execute("SELECT 1")
                cursor.fetchone()
                trips.append((time.perf_counter() - started) * 1000)
            description["select_1_round_trip_p50_ms"] = round(statistics.median(trips), 3)
    return description


def load_average() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def print_table(rows: Sequence[dict[str, object]], columns: Sequence[str]) -> None:
    def shown(value: object) -> str:
        if isinstance(value, float):
            return f"{value:,.1f}"
        return "" if value is None else str(value)

    widths = [
        max(len(column), *(len(shown(row.get(column))) for row in rows)) for column in columns
    ]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest])

    print(line(list(columns)))
    for row in rows:
        print(line([shown(row.get(column)) for column in columns]))


def write_results(name: str, payload: dict[str, object]) -> Path:
    out = ROOT / "bench" / "results" / f"{name}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")
    return out
