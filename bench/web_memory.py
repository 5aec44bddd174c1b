"""Memory of the web processes: what each gunicorn worker adds, with the live engine loaded in
each worker (plain ``gunicorn siamweb.wsgi``) or once in the master before the fork
(``-c deploy/gunicorn.conf.py``, as docs/deploying.md runs it), and after models were
promoted while the server ran.

For each mode and worker count: gunicorn (gthread, 2 threads a worker) on a scratch PostgreSQL
database holding O*NET with the shipped model live; each worker in turn answers normalize
requests while the others are stopped (SIGSTOP), so every one has served. With
``--promotions N`` a new version of O*NET's model (the shipped weights imported again, indexed,
made live, as a worker's promotion leaves it) goes live N times while the server runs, and every
worker serves with each before memory is read. Then /proc gives each process's RSS, PSS (shared
pages divided among their sharers) and USS (its private pages). A worker more costs the growth
of the summed PSS from the fewest workers to the most, divided by the extra workers. The same
text is normalized in every server and the answers compared.

    .venv/bin/python bench/web_memory.py [--workers 1 2 4] [--promotions 2] [--modes preloaded]
    .venv/bin/python bench/web_memory.py --root /tmp/before --results web_memory_before

Prints a table and writes bench/results/web_memory.json (web_memory_2_promotions.json with
``--promotions 2``); the scratch database is dropped.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _pg
from bench._servers import (
    ROOT,
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

from annotations.models import Taxonomy  # noqa: E402
from annotations.services.accounts import user_ensure  # noqa: E402
from models_app.training.services.builds import model_version_import  # noqa: E402
from models_app.training.services.indexes import deployment_activate, index_build_create  # noqa: E402

PATH = "/api/v1/taxonomies/onet/normalize"
MODES = {"a copy in each worker": None, "preloaded, shared": "deploy/gunicorn.conf.py"}
MODE_NAMES = {"each": "a copy in each worker", "preloaded": "preloaded, shared"}
SHIPPED = ROOT / "data" / "models" / "onet"
REQUESTS_PER_WORKER = 20


def all_workers(master: int, count: int) -> list[int]:
    """The master's workers once all ``count`` have started (it forks them one after another:
    the first may answer before the last exists)."""
    deadline = time.monotonic() + 120
    while len(pids := sorted(children(master))) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(pids)} of {count} gunicorn workers started")
        time.sleep(0.2)
    time.sleep(1.0)  # the last one past its start-up
    return pids


def serve_with_each_worker(pids: list[int], client: NormalizeClient, texts: list[str]) -> list:
    """Each worker answers ``REQUESTS_PER_WORKER`` requests while the others are stopped (the
    master hands a connection to whichever worker takes it first); the last answer of each.
    Every worker answers the same texts, so they read the same pages of the mapped files, as
    workers do once traffic has read a model's busy pages: a worker more then adds its own
    memory, not pages of the model that other texts happened to read."""
    answers = []
    for pid in pids:
        others = [other for other in pids if other != pid]
        for other in others:
            os.kill(other, signal.SIGSTOP)
        try:
            for n in range(REQUESTS_PER_WORKER):
                answer = client.normalize([texts[n % len(texts)]])[0]
        finally:
            for other in others:
                os.kill(other, signal.SIGCONT)
        answers.append(answer)
    return answers


def promote_new_version(taxonomy: Taxonomy) -> str:
    """A new version of the model made live, as a worker's promotion leaves it: its folder,
    its index build (the search's tables with it) and the live pointer moved."""
    version = model_version_import(taxonomy=taxonomy, folder=SHIPPED)
    deployment_activate(index_build=index_build_create(model_version=version))
    return version.label


def measure(
    mode: str,
    workers: int,
    token: str,
    texts: list[str],
    *,
    promotions: int,
    taxonomy: Taxonomy,
    root: Path,
) -> dict:
    port = free_port()
    server = start_gunicorn(
        port=port, workers=workers, threads=2, torch_threads=1, config=MODES[mode], root=root
    )
    try:
        client = NormalizeClient(port, token, PATH, keep_alive=False)
        pids = all_workers(server.pid, workers)
        answers = serve_with_each_worker(pids, client, texts)
        served = [{answer["model_version"] for answer in answers}]
        for _ in range(promotions):
            label = promote_new_version(taxonomy)
            answers = serve_with_each_worker(pids, client, texts)
            served.append({answer["model_version"] for answer in answers})
            if served[-1] != {label}:
                raise RuntimeError(f"after promoting {label} the workers served {served[-1]}")
        first = client.normalize([texts[0]])[0]
        time.sleep(1.0)
        master = memory_mb(server.pid)
        worker_memory = [memory_mb(pid) for pid in pids]
    finally:
        stop_gunicorn(server)
    return {
        "mode": mode,
        "workers": workers,
        "promotions": promotions,
        "served_versions": [sorted(versions) for versions in served],
        "requests": REQUESTS_PER_WORKER * workers * (promotions + 1) + 1,
        "master": master,
        "worker_memory": worker_memory,
        "pss_total_mb": round(master["pss_mb"] + sum(w["pss_mb"] for w in worker_memory), 1),
        "worker_uss_mean_mb": round(sum(w["uss_mb"] for w in worker_memory) / workers, 1),
        "worker_rss_mean_mb": round(sum(w["rss_mb"] for w in worker_memory) / workers, 1),
        "top_group": first["groups"][0]["code"] if first["groups"] else None,
        "last_top_group": answers[-1]["groups"][0]["code"] if answers[-1]["groups"] else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument(
        "--promotions", type=int, default=0, help="new model versions made live while it runs"
    )
    parser.add_argument(
        "--modes", nargs="+", choices=sorted(MODE_NAMES), default=["each", "preloaded"]
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout the server runs")
    parser.add_argument("--results", help="name of the JSON file under bench/results/")
    args = parser.parse_args()
    modes = [MODE_NAMES[name] for name in args.modes]
    taxonomy = _pg.onet_live()
    user, _ = user_ensure(username="bench-memory", password="bench-pass-123", admin=False)
    token = Token.objects.create(user=user).key
    machine = _pg.machine()
    connections.close_all()
    texts = _pg.demo_inputs()

    rows = []
    for mode in modes:
        for workers in args.workers:
            row = measure(
                mode,
                workers,
                token,
                texts,
                promotions=args.promotions,
                taxonomy=taxonomy,
                root=args.root.resolve(),
            )
            rows.append(row)
            print(
                f"{mode:24} {workers} workers: PSS total {row['pss_total_mb']:,.0f} MB, "
                f"worker USS {row['worker_uss_mean_mb']:,.0f} MB, RSS "
                f"{row['worker_rss_mean_mb']:,.0f} MB",
                flush=True,
            )
    fewest, most = min(args.workers), max(args.workers)
    summary = {}
    for mode in modes:
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
        args.results
        or (f"web_memory_{args.promotions}_promotions" if args.promotions else "web_memory"),
        {
            "machine": machine,
            "load_average_after": _pg.load_average(),
            "server": "gunicorn 23, gthread, 2 threads a worker, torch 1 thread",
            "served_by": str(args.root.resolve()),
            "taxonomy": "O*NET, the shipped model (53,767 members)",
            "promotions": args.promotions,
            "added_per_worker_pss_mb": summary,
            "target_per_worker_mb": 150,
            "same_answer_everywhere": len(answers) == 1,
            "rows": rows,
        },
    )


if __name__ == "__main__":
    main()
