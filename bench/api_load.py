"""The normalize API under concurrent load: gunicorn on loopback, O*NET with the shipped model.

Starts gunicorn (``siamweb.wsgi``, gthread workers) on a scratch PostgreSQL database holding
O*NET with the shipped model live, warms every worker up (each loads the model and index on its
first request), then drives POST /api/v1/taxonomies/onet/normalize (token auth, one text a
request, texts from data/demo_inputs.txt) with N concurrent keep-alive clients (threads with
http.client) for a fixed time at each concurrency level, and reports requests/s, p50, p99 and
errors, and where the CPU time went per request (gunicorn, the PostgreSQL backends of the
scratch database, the load generator; read from /proc), which bounds what 2 cores can serve.
Latency is measured by the client: it includes the loopback HTTP round trip. The load generator
runs on the same machine and shares its cores with the server.

    .venv/bin/python bench/api_load.py [--servers 2x1 2x2 2x4 3x2] [--seconds 15]
        [--concurrency 1 4 8 16] [--torch-threads 1]

``--servers`` lists the gunicorn shapes to measure, workers x threads each (each worker holds
its own model and index, about 650 MB).

gunicorn is stopped at the end, also on an error or Ctrl-C; the scratch database
(siamweb_bench_<pid>) is dropped. Prints a table and writes bench/results/api_load.json.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _pg
from bench._servers import children, free_port, process_cpu_ms, start_gunicorn, stop_gunicorn

DATABASE_URL = _pg.scratch_database(broker="memory://")

from django.db import connections  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402

from annotations.services.accounts import user_ensure  # noqa: E402

ROOT = _pg.ROOT
PATH = "/api/v1/taxonomies/onet/normalize"


class CpuMeter:
    """Where the CPU time of a load level went, per request: gunicorn (master and workers),
    the PostgreSQL backends serving the scratch database, and this load generator."""

    def __init__(self, *, server: subprocess.Popen, database_url: str) -> None:
        self.server = server
        self.database_url = database_url

    def _database_pids(self) -> list[int]:
        import psycopg

        with psycopg.connect(self.database_url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
        return [pid for (pid,) in rows]

    def _snapshot(self) -> dict[str, dict[int, float]]:
        parts = {
            "server": [self.server.pid, *children(self.server.pid)],
            "database": self._database_pids(),
        }
        return {
            part: {pid: cpu for pid in pids if (cpu := process_cpu_ms(pid)) is not None}
            for part, pids in parts.items()
        }

    def start(self) -> None:
        self.before = self._snapshot()
        self.client_before = time.process_time()

    def per_request(self, requests: int) -> dict[str, float]:
        after = self._snapshot()
        spent = {
            part: sum(cpu - self.before[part].get(pid, 0.0) for pid, cpu in after[part].items())
            for part in after
        }
        spent["client"] = (time.process_time() - self.client_before) * 1000
        return {f"cpu_ms_{part}": ms / max(requests, 1) for part, ms in spent.items()}


def drive(
    *,
    port: int,
    token: str,
    texts: list[str],
    concurrency: int,
    seconds: float,
    meter: CpuMeter | None = None,
) -> dict[str, object]:
    """``concurrency`` clients, each on one keep-alive connection, sending one request after
    another for ``seconds``."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(concurrency + 1)
    stop_at: list[float] = [0.0]
    headers = {
        "Host": "localhost",
        "Authorization": f"Token {token}",
        "Content-Type": "application/json",
    }

    def client(number: int) -> None:
        rng = random.Random(number)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine, failed = [], []
        start.wait()
        while time.perf_counter() < stop_at[0]:
            body = json.dumps({"texts": [rng.choice(texts)]})
            began = time.perf_counter()
            try:
                connection.request("POST", PATH, body=body, headers=headers)
                response = connection.getresponse()
                payload = response.read()
                if response.status != 200:
                    failed.append(f"HTTP {response.status}: {payload[:120]!r}")
                    continue
            except (OSError, http.client.HTTPException) as exc:
                failed.append(repr(exc))
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                continue
            mine.append((time.perf_counter() - began) * 1000)
        connection.close()
        with lock:
            latencies.extend(mine)
            errors.extend(failed)

    # Daemon threads: on Ctrl-C the process exits (stopping gunicorn) without waiting for them.
    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(concurrency)]
    for thread in threads:
        thread.start()
    if meter:
        meter.start()
    stop_at[0] = time.perf_counter() + seconds
    began = time.perf_counter()
    start.wait()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    row: dict[str, object] = {
        "concurrency": concurrency,
        "requests": len(latencies),
        "requests_per_s": len(latencies) / elapsed,
        "errors": len(errors),
    }
    if latencies:
        row.update(_pg.summary(latencies))
        row.pop("n")
    if meter:
        row.update(meter.per_request(len(latencies) + len(errors)))
    if errors:
        row["first_error"] = errors[0]
    return row


def server_shape(text: str) -> tuple[int, int]:
    """ "2x4" → 2 workers of 4 threads each."""
    try:
        workers, threads = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WORKERSxTHREADS, got {text!r}") from None
    return workers, threads


def measure_server(
    *,
    workers: int,
    threads: int,
    args: argparse.Namespace,
    token: str,
    texts: list[str],
    database_url: str,
) -> list[dict[str, object]]:
    port = free_port()
    server = start_gunicorn(
        port=port, workers=workers, threads=threads, torch_threads=args.torch_threads
    )
    meter = CpuMeter(server=server, database_url=database_url)
    rows = []
    try:
        # Every worker thread gets requests, so every worker loads the model and index now.
        warm = drive(
            port=port,
            token=token,
            texts=texts,
            concurrency=workers * threads * 2,
            seconds=args.warmup,
        )
        print(f"{workers}x{threads} warm-up: {warm['requests']} requests, {warm['errors']} errors")
        for concurrency in args.concurrency:
            load_before = _pg.load_average()
            row = {
                "server": f"{workers}x{threads}",
                **drive(
                    port=port,
                    token=token,
                    texts=texts,
                    concurrency=concurrency,
                    seconds=args.seconds,
                    meter=meter,
                ),
                "load_1min_before": load_before[0],
            }
            rows.append(row)
            print(
                f"{workers}x{threads}, concurrency {concurrency}: "
                f"{row['requests_per_s']:.0f} req/s, p50 {row.get('p50_ms', 0):.1f} ms, "
                f"p99 {row.get('p99_ms', 0):.1f} ms, {row['errors']} errors, "
                f"load {load_before[0]}"
            )
    finally:
        stop_gunicorn(server)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--servers",
        type=server_shape,
        nargs="+",
        default=[(2, 1), (2, 2), (2, 4), (3, 2)],
        help="gunicorn shapes to measure, WORKERSxTHREADS each",
    )
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--warmup", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8, 16])
    args = parser.parse_args()

    _pg.onet_live()
    user, _ = user_ensure(username="bench-api", password="bench-pass-123", admin=False)
    token = Token.objects.create(user=user).key
    machine = _pg.machine()
    connections.close_all()  # the server's processes open their own
    texts = _pg.demo_inputs()

    load_before = _pg.load_average()
    rows = []
    for workers, threads in args.servers:
        rows += measure_server(
            workers=workers,
            threads=threads,
            args=args,
            token=token,
            texts=texts,
            database_url=DATABASE_URL,
        )
    load_after = _pg.load_average()

    settings = {
        "server": "gunicorn 23 (gthread workers), loopback, keep-alive",
        "torch_threads_per_worker": args.torch_threads,
        "seconds_per_level": args.seconds,
        "texts_per_request": 1,
    }
    print(f"machine: {machine}")
    print(f"server: {settings}")
    print(f"load average before / after: {load_before} / {load_after}")
    _pg.print_table(
        rows,
        [
            "server",
            "concurrency",
            "requests",
            "requests_per_s",
            "p50_ms",
            "p99_ms",
            "max_ms",
            "errors",
            "cpu_ms_server",
            "cpu_ms_database",
            "cpu_ms_client",
            "load_1min_before",
        ],
    )
    best = max(rows, key=lambda row: row["requests_per_s"])
    met = [
        f"{row['server']} at concurrency {row['concurrency']}"
        for row in rows
        if row["requests_per_s"] >= 200 and row.get("p99_ms", 1e9) <= 50 and not row["errors"]
    ]
    print(
        "target: ≥ 200 requests/s with p99 ≤ 50 ms on 2 cores: "
        + (f"met by {', '.join(met)}" if met else "NOT met")
        + f" (most: {best['requests_per_s']:.0f} req/s, {best['server']} at concurrency "
        f"{best['concurrency']}, p99 {best.get('p99_ms', 0):.0f} ms)"
    )
    _pg.write_results(
        "api_load",
        {
            "machine": machine,
            "load_average_before": load_before,
            "load_average_after": load_after,
            "load_generator": "threads with http.client in the benchmark's process, on the "
            "same 2 cores as the server, one keep-alive connection each",
            **settings,
            "target": {"requests_per_s": 200, "p99_ms": 50},
            "target_met_by": met,
            "rows": rows,
        },
    )


if __name__ == "__main__":
    main()
