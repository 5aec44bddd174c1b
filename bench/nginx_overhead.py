"""What nginx in front costs: normalize traffic straight to gunicorn and through nginx, paired.

One gunicorn (2 workers x 2 threads, as bench/load_faults.py runs it) on a scratch PostgreSQL
database with O*NET and the shipped model live, and nginx with the site config
docs/deploying.md gives (HTTPS, self-signed) in front of it; nothing else runs. Eight keep-alive
clients send one real title a request, in windows that alternate between the two (which goes
first alternates too), so both see the host at the same moments. For each window: normalize/s
and the CPU milliseconds a request took in gunicorn's workers, in nginx and in the clients
(their TLS included). The throughput ratio is the geometric mean of the pairs' ratios with its
95% t-interval. bench/load_faults.py measures the same ratio with the Celery worker and beat
running, after its faults phase.

    .venv/bin/python bench/nginx_overhead.py [--pairs 20] [--seconds 10]

Prints a table and writes bench/results/nginx_overhead.json; the scratch database is dropped.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _pg
from bench._nginx import start_nginx, stop_nginx
from bench._servers import children, free_port, process_cpu_ms, start_gunicorn, stop_gunicorn
from bench.load_faults_clients import Recorder, Server, normalize_client
from bench.load_faults_phases import NORMALIZE_CLIENTS, geometric_mean_interval


def window(server: Server, token: str, texts: list[str], seconds: float, pids) -> dict:
    """``seconds`` of normalize traffic from the load benchmark's clients; what each side spent."""
    recorder, stop = Recorder(), threading.Event()
    threads = [
        threading.Thread(target=normalize_client, args=(server, token, texts, stop, recorder))
        for _ in range(NORMALIZE_CLIENTS)
    ]
    spent_before = {
        side: sum(process_cpu_ms(pid) or 0 for pid in ids) for side, ids in pids.items()
    }
    clients_before = time.process_time()
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    answered = recorder.statuses["200"]
    requests = sum(recorder.statuses.values())
    row = {"normalize_per_s": round(answered / elapsed, 1), "not_200": requests - answered}
    for side, ids in pids.items():
        spent = sum(process_cpu_ms(pid) or 0 for pid in ids) - spent_before[side]
        row[f"{side}_cpu_ms_a_request"] = round(spent / requests, 3)
    row["clients_cpu_ms_a_request"] = round(
        (time.process_time() - clients_before) * 1000 / requests, 3
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each window")
    args = parser.parse_args()

    _pg.scratch_database()
    _pg.onet_live()
    from django.db import connections
    from rest_framework.authtoken.models import Token

    from annotations.services.accounts import user_ensure

    user, _ = user_ensure(username="bench-nginx", password="bench-nginx-password", admin=False)
    token = Token.objects.create(user=user).key
    texts = _pg.realistic_inputs(2000)
    machine = _pg.machine()
    connections.close_all()

    scratch = Path(tempfile.mkdtemp(prefix="siamweb-nginx-"))
    port = free_port()
    web = start_gunicorn(port=port, workers=2, threads=2, torch_threads=1, log=scratch / "web.log")
    proxy = start_nginx(scratch / "nginx", upstream_port=port, static_root=scratch / "static")
    servers = {"direct": Server(port), "nginx": Server(port, proxy.https_port)}
    try:
        time.sleep(3)
        pids = {
            "gunicorn": children(web.pid),
            "nginx": [proxy.process.pid, *children(proxy.process.pid)],
        }
        for name in servers:  # each way once first, not counted: caches and connections warm
            window(servers[name], token, texts, args.seconds, pids)
        rows, ratios = [], []
        for number in range(args.pairs):
            order = ["direct", "nginx"] if number % 2 == 0 else ["nginx", "direct"]
            rates = {}
            for name in order:
                row = {"pair": number + 1, "to": name}
                row.update(window(servers[name], token, texts, args.seconds, pids))
                rates[name] = row["normalize_per_s"]
                rows.append(row)
                print(row, flush=True)
            ratios.append(rates["nginx"] / rates["direct"])
    finally:
        stop_nginx(proxy)
        stop_gunicorn(web)

    mean, low, high = geometric_mean_interval(ratios)
    columns = [column for column in rows[0] if column not in ("pair", "to")]
    summary = []
    for name in servers:
        chosen = [row for row in rows if row["to"] == name]
        means = {
            column: round(statistics.mean(row[column] for row in chosen), 3) for column in columns
        }
        summary.append({"to": name, "windows": len(chosen), **means})
    _pg.print_table(summary, list(summary[0]))
    ratio = {
        "pairs": args.pairs,
        "seconds_per_window": args.seconds,
        "nginx_vs_direct_ratios": [round(r, 3) for r in ratios],
        "nginx_vs_direct_mean": round(mean, 3),
        "nginx_vs_direct_95ci": [round(low, 3), round(high, 3)],
    }
    print(
        f"normalize/s through nginx / direct, geometric mean of {args.pairs} pairs: "
        f"{ratio['nginx_vs_direct_mean']} (95% CI {ratio['nginx_vs_direct_95ci']})"
    )
    _pg.write_results(
        "nginx_overhead",
        {
            "command": "bench/nginx_overhead.py " + " ".join(sys.argv[1:]),
            "machine": machine,
            "server": "gunicorn 2x2 (gthread); nginx (deploy/nginx-siamweb.conf, HTTPS) in front",
            "clients": NORMALIZE_CLIENTS,
            "summary": summary,
            "ratio": ratio,
            "windows": rows,
        },
    )


if __name__ == "__main__":
    main()
