"""Memory of the web processes: what each gunicorn worker adds, with the live engine loaded in
each worker (plain ``gunicorn siamweb.wsgi``) or once in the master before the fork
(``-c python:siamweb.gunicorn_config``, as docs/deploying.md runs it).

For each mode and worker count: gunicorn (gthread, 2 threads a worker) on a scratch PostgreSQL
database holding O*NET with the shipped model live; every worker answers normalize requests (a
new connection each, so the master spreads them) until each has served; then /proc gives each
process's RSS, PSS (shared pages divided among their sharers) and USS (its private pages). A
worker more costs the growth of the summed PSS from 1 worker to the most, divided by the extra
workers. The same text is normalized in both modes and the answers compared.

    .venv/bin/python bench/web_memory.py [--workers 1 2 4]

Prints a table and writes bench/results/web_memory.json; the scratch database is dropped.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _pg
from bench._servers import (
    NormalizeClient,
    children,
    free_port,
    memory_mb,
    start_gunicorn,
    stop_gunicorn,
)

_pg.scratch_database(broker="memory://")

from django.db import connections  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402

from annotations.services.accounts import user_ensure  # noqa: E402

PATH = "/api/v1/taxonomies/onet/normalize"
MODES = {"a copy in each worker": None, "preloaded, shared": "python:siamweb.gunicorn_config"}


def measure(mode: str, workers: int, token: str, texts: list[str]) -> dict:
    port = free_port()
    server = start_gunicorn(
        port=port, workers=workers, threads=2, torch_threads=1, config=MODES[mode]
    )
    try:
        client = NormalizeClient(port, token, PATH, keep_alive=False)
        pids = sorted(children(server.pid))
        served: set[int] = set()
        answer = None
        # A worker that has served a request has its engine. Workers do not say which one
        # answered, so without preloading requests go on until every worker's private memory
        # has grown by its own copy of the engine.
        baseline = {pid: memory_mb(pid)["uss_mb"] for pid in pids}
        for attempt in range(400):
            result = client.normalize([texts[attempt % len(texts)]])[0]
            answer = answer or client.normalize([texts[0]])[0]
            if attempt % 20 == 19 and attempt >= 59:
                served = {pid for pid in pids if memory_mb(pid)["uss_mb"] > baseline[pid] + 1}
                if MODES[mode] or len(served) == len(pids):
                    break
        time.sleep(1.0)
        master = memory_mb(server.pid)
        worker_memory = [memory_mb(pid) for pid in pids]
    finally:
        stop_gunicorn(server)
    return {
        "mode": mode,
        "workers": workers,
        "requests": attempt + 1,
        "master": master,
        "worker_memory": worker_memory,
        "pss_total_mb": round(master["pss_mb"] + sum(w["pss_mb"] for w in worker_memory), 1),
        "worker_uss_mean_mb": round(sum(w["uss_mb"] for w in worker_memory) / workers, 1),
        "worker_rss_mean_mb": round(sum(w["rss_mb"] for w in worker_memory) / workers, 1),
        "top_group": answer["groups"][0]["code"] if answer and answer["groups"] else None,
        "last_top_group": result["groups"][0]["code"] if result["groups"] else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    _pg.onet_live()
    user, _ = user_ensure(username="bench-memory", password="bench-pass-123", admin=False)
    token = Token.objects.create(user=user).key
    machine = _pg.machine()
    connections.close_all()
    texts = _pg.demo_inputs()

    rows = []
    for mode in MODES:
        for workers in args.workers:
            rows.append(measure(mode, workers, token, texts))
            row = rows[-1]
            print(
                f"{mode:24} {workers} workers: PSS total {row['pss_total_mb']:,.0f} MB, "
                f"worker USS {row['worker_uss_mean_mb']:,.0f} MB, RSS "
                f"{row['worker_rss_mean_mb']:,.0f} MB",
                flush=True,
            )
    fewest, most = min(args.workers), max(args.workers)
    summary = {}
    for mode in MODES:
        by_workers = {row["workers"]: row for row in rows if row["mode"] == mode}
        if most > fewest:
            growth = by_workers[most]["pss_total_mb"] - by_workers[fewest]["pss_total_mb"]
            summary[mode] = round(growth / (most - fewest), 1)
    answers = {row["top_group"] for row in rows}
    print(f"\nmachine: {machine}")
    _pg.print_table(
        rows,
        ["mode", "workers", "pss_total_mb", "worker_uss_mean_mb", "worker_rss_mean_mb"],
    )
    for mode, per_worker in summary.items():
        print(f"{mode}: each worker beyond {fewest} adds {per_worker:,.0f} MB (PSS)")
    print(f"same answer in every server: {len(answers) == 1} ({sorted(map(str, answers))})")
    _pg.write_results(
        "web_memory",
        {
            "machine": machine,
            "server": "gunicorn 23, gthread, 2 threads a worker, torch 1 thread",
            "taxonomy": "O*NET, the shipped model (53,767 members)",
            "added_per_worker_pss_mb": summary,
            "target_per_worker_mb": 150,
            "same_answer_everywhere": len(answers) == 1,
            "rows": rows,
        },
    )


if __name__ == "__main__":
    main()
