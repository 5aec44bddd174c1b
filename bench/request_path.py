"""Where a one-text normalize request spends its time outside the engine (issue #52, point 2).

A scratch PostgreSQL database with O*NET and the shipped model live (``bench/_pg.py``); one
curator's token; JobBERT-like inputs (``realistic_inputs``). Each request goes through Django's
whole handler (every middleware, DRF's authentication, permission and throttle checks, the
parser, the serializer, the engine, the JSON renderer) in this process, as a gunicorn worker
runs it, without the socket.

Two passes over the same texts:

1. **Timed** (no profiler): each request's wall time, the engine's call inside it
   (``rank_taxonomy_groups``) and the SQL it ran (count and time), so the part outside the engine
   is measured, not inferred.
2. **Profiled** (cProfile): the cumulative time of each stage of the request path, as shares of
   the handler's. cProfile slows many small calls more than a few big ones, so shares, not its
   milliseconds, are what it is read for.

Prints both tables and writes ``bench/results/request_path.json``.

    .venv/bin/python bench/request_path.py [--requests 400]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import _pg  # noqa: E402

_pg.scratch_database()

from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402

from annotations.services.accounts import user_ensure  # noqa: E402
from models_app.serving import api as serving_api  # noqa: E402

# (stage, the function whose cumulative time it is: file suffix, function name)
STAGES = [
    ("Django's handler, every middleware in", ("django/core/handlers/base.py", "get_response")),
    ("DRF dispatch (the view, all of it)", ("rest_framework/views.py", "dispatch")),
    ("DRF initial: auth, permission, throttles", ("rest_framework/views.py", "initial")),
    ("token authentication", ("siamweb/authentication.py", "authenticate")),
    ("request body parsed", ("rest_framework/request.py", "_load_data_and_files")),
    ("the view's post", ("models_app/serving/api.py", "post")),
    ("taxonomy looked up", ("siamweb/web/api.py", "taxonomy_or_404")),
    ("serializer validated", ("rest_framework/serializers.py", "is_valid")),
    ("engine: rank_taxonomy_groups", ("models_app/serving/normalize.py", "rank_taxonomy_groups")),
    ("answers as dicts", ("models_app/serving/normalize.py", "as_dict")),
    ("response rendered (JSON)", ("rest_framework/response.py", "rendered_content")),
    ("SQL executed", ("django/db/backends/utils.py", "_execute")),
]


class Recorder:
    """The engine's time and the SQL's time and count inside the current request."""

    def __init__(self) -> None:
        self.engine_ms = 0.0
        self.sql_ms = 0.0
        self.queries = 0

    def __call__(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.sql_ms += (time.perf_counter() - started) * 1000
            self.queries += 1


def profiled_stages(stats: pstats.Stats) -> dict[str, float]:
    """Each stage's cumulative seconds, summed over the functions that match it."""
    found = dict.fromkeys((name for name, _ in STAGES), 0.0)
    for (filename, _line, function), row in stats.stats.items():
        for name, (suffix, wanted) in STAGES:
            if function == wanted and filename.endswith(suffix):
                found[name] += row[3]  # cumulative time
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=400)
    args = parser.parse_args()
    _pg.onet_live()
    user, _ = user_ensure(username="bench", password="bench-pass-123", admin=False)
    client = Client(
        HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}", HTTP_HOST="localhost"
    )
    texts = _pg.realistic_inputs(args.requests)

    recorder = Recorder()
    rank = serving_api.rank_taxonomy_groups

    def timed_rank(*call_args, **kwargs):
        started = time.perf_counter()
        try:
            return rank(*call_args, **kwargs)
        finally:
            recorder.engine_ms += (time.perf_counter() - started) * 1000

    def post(text: str) -> None:
        response = client.post(
            "/api/v1/taxonomies/onet/normalize", {"texts": [text]}, content_type="application/json"
        )
        assert response.status_code == 200, response.content

    for text in texts[:30]:  # warm: model, index, the taxonomy's rows, prepared statements
        post(text)

    rows = []
    serving_api.rank_taxonomy_groups = timed_rank
    try:
        with connection.execute_wrapper(recorder):
            for text in texts:
                recorder.engine_ms = recorder.sql_ms = 0.0
                recorder.queries = 0
                started = time.perf_counter()
                post(text)
                total = (time.perf_counter() - started) * 1000
                rows.append((total, recorder.engine_ms, recorder.sql_ms, recorder.queries))
    finally:
        serving_api.rank_taxonomy_groups = rank

    def p50(index: int) -> float:
        return statistics.median(row[index] for row in rows)

    outside = [row[0] - row[1] for row in rows]
    timed_table = {
        "request_p50_ms": p50(0),
        "engine_p50_ms": p50(1),
        "outside_engine_p50_ms": statistics.median(outside),
        "outside_engine_p99_ms": _pg.percentile(outside, 0.99),
        "sql_p50_ms": p50(2),
        "queries_per_request": statistics.median(row[3] for row in rows),
    }

    profile = cProfile.Profile()
    profile.enable()
    for text in texts:
        post(text)
    profile.disable()
    stages = profiled_stages(pstats.Stats(profile))
    handler = stages[STAGES[0][0]]
    shares = {name: seconds / handler for name, seconds in stages.items()}

    machine = _pg.machine()
    print(f"machine: {machine}")
    print(f"\nTimed, {len(rows)} one-text requests (p50 of each part, ms):")
    for key, value in timed_table.items():
        print(f"  {key:<28}{value:>8.2f}")
    print("\nProfiled: share of Django's handler (cProfile; nested stages overlap):")
    for name, share in shares.items():
        print(f"  {name:<44}{share:>7.1%}")
    _pg.write_results(
        "request_path",
        {
            "machine": machine,
            "requests": len(rows),
            "timed": timed_table,
            "profiled_share_of_handler": shares,
            "command": "bench/request_path.py " + " ".join(sys.argv[1:]),
        },
    )


if __name__ == "__main__":
    main()
