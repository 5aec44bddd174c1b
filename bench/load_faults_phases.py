"""One database's phases in bench/load_faults.py: the clients run against the servers (with the
faults, in the last), then the wait for the runs to settle and the count of verdicts stored."""

from __future__ import annotations

import collections
import json
import threading
import time

from bench.load_faults_clients import (
    Recorder,
    Server,
    api_curator,
    json_request,
    normalize_client,
    page_curator,
)

NORMALIZE_CLIENTS = 8


def gunicorn_rss(process) -> float:
    from bench._servers import children, rss_mb

    return round(sum(rss_mb(pid) for pid in children(process.pid)), 1)


def run_phase(name, *, server, state, seconds, curators, faults, processes, log_dir) -> dict:
    from bench import _pg
    from bench._servers import kill_tree, start_celery, start_gunicorn, stop_gunicorn

    rec = Recorder()
    stop = threading.Event()
    token = state["curator_tokens"][0] if state["curator_tokens"] else state["admin_token"]
    threads = [
        threading.Thread(
            target=normalize_client, args=(server, token, state["texts"], stop, rec), daemon=True
        )
        for _ in range(NORMALIZE_CLIENTS)
    ]
    if curators:
        threads += [
            threading.Thread(target=api_curator, args=(server, tok, stop, rec), daemon=True)
            for tok in state["curator_tokens"]
        ]
        threads.append(threading.Thread(target=page_curator, args=(server, stop, rec), daemon=True))
    events: list[str] = []
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    if faults:
        connection = server.connection()
        status, _ = json_request(
            connection,
            "POST",
            "/api/v1/training-runs",
            state["admin_token"],
            {"taxonomy": "onet", "kind": "finetune"},
        )
        connection.close()
        events.append(f"{time.perf_counter() - began:.0f} s: fine-tune asked for ({status})")
    if faults:
        time.sleep(seconds / 3)
        running = running_runs()
        kill_tree(processes["worker"])
        events.append(
            f"{time.perf_counter() - began:.0f} s: worker killed (SIGKILL) with run(s) "
            f"{running or 'none'} running"
        )
        state["killed_runs"] += running
        state["killed_at"] = time.time()
        time.sleep(2)
        processes["worker"] = start_celery("worker", log=log_dir / "worker.log")
        time.sleep(seconds / 3 - 2)
        stop_gunicorn(processes["web"])
        processes["web"] = start_gunicorn(
            port=server.web_port, workers=2, threads=2, torch_threads=1, log=log_dir / "web.log"
        )
        events.append(f"{time.perf_counter() - began:.0f} s: gunicorn restarted")
        time.sleep(max(0.0, seconds - (time.perf_counter() - began)))
    else:
        time.sleep(seconds)
    rss = gunicorn_rss(processes["web"])
    stop.set()
    for thread in threads:
        thread.join(timeout=120)
    elapsed = time.perf_counter() - began
    row: dict[str, object] = {
        "phase": name,
        "normalize_requests": sum(rec.statuses.values()),
        "normalize_per_s": round(rec.statuses["200"] / elapsed, 1),
        "normalize_statuses": dict(rec.statuses),
        "web_rss_mb": rss,
        "events": events,
    }
    if rec.latencies:
        summary = _pg.summary(rec.latencies)
        row.update(p50_ms=round(summary["p50_ms"], 1), p99_ms=round(summary["p99_ms"], 1))
    if curators:
        row.update(
            verdicts_sent=len(rec.verdicts),
            verdict_outcomes=dict(collections.Counter(rec.verdicts.values())),
            verdict_statuses=dict(rec.verdict_statuses),
            verdict_retries=rec.verdict_retries,
        )
        state["verdicts"].update(rec.verdicts)
    print(
        f"{name}: {row['normalize_per_s']} normalize/s, p50 {row.get('p50_ms')} ms, "
        f"p99 {row.get('p99_ms')} ms, {row['normalize_statuses']}, web {rss} MB"
        + (f", verdicts {row['verdict_outcomes']}" if curators else "")
    )
    return row


def running_runs() -> list[int]:
    from django.db import connections

    from models_app.models import TrainingRun

    ids = list(TrainingRun.objects.filter(status="running").values_list("id", flat=True))
    connections.close_all()
    return ids


def settle(state, server: Server, *, limit_seconds: float) -> dict[str, object]:
    """Wait for the killed run to be failed by the scheduled check, retry it, and wait for every
    run to finish."""
    from django.db import connections

    from models_app.models import TrainingRun

    began = time.monotonic()
    failed_after: dict[int, float] = {}
    retries: dict[int, int] = {}
    while time.monotonic() - began < limit_seconds:
        for run_id in state["killed_runs"]:
            run = TrainingRun.objects.get(id=run_id)
            if run.status == "failed" and run_id not in retries:
                failed_after[run_id] = round(run.finished_at.timestamp() - state["killed_at"], 1)
                connection = server.connection()
                status, data = json_request(
                    connection,
                    "POST",
                    f"/api/v1/training-runs/{run_id}/retry",
                    state["admin_token"],
                    {},
                )
                connection.close()
                if status == 202:
                    retries[run_id] = json.loads(data)["id"]
        active = TrainingRun.objects.filter(status__in=["queued", "running"]).exists()
        connections.close_all()
        if not active and len(retries) == len(state["killed_runs"]):
            break
        time.sleep(2)
    runs = list(TrainingRun.objects.order_by("id").values("id", "kind", "status", "retry_of"))
    connections.close_all()
    return {
        # From the SIGKILL to the run's failure, by beat's check of the heartbeat.
        "killed_runs_failed_after_s": failed_after,
        "retries": {
            run_id: next(r["status"] for r in runs if r["id"] == retry)
            for run_id, retry in retries.items()
        },
        "runs_by_status": dict(collections.Counter(r["status"] for r in runs)),
        "runs_left_running": sum(r["status"] == "running" for r in runs),
        "settle_s": round(time.monotonic() - began, 1),
    }


def verdict_accounting(verdicts: dict[str, str]) -> dict[str, int]:
    from django.db.models import Count

    from annotations.models import Judgement

    stored = dict(
        Judgement.objects.exclude(idempotency_key="")
        .values_list("idempotency_key")
        .annotate(n=Count("id"))
        .values_list("idempotency_key", "n")
    )
    keys = {key: key.split(":", 1)[1] for key in verdicts}
    acknowledged = [key for key, outcome in verdicts.items() if outcome in ("200", "201")]
    refused = [key for key in verdicts if key not in acknowledged]
    return {
        "acknowledged": len(acknowledged),
        "acknowledged_lost": sum(stored.get(keys[key], 0) == 0 for key in acknowledged),
        "stored_twice": sum(n > 1 for n in stored.values()),
        "refused": len(refused),
        "refused_but_stored": sum(stored.get(keys[key], 0) > 0 for key in refused),
        "refused_not_4xx_or_503": sum(
            not (verdicts[key].startswith("4") or verdicts[key] == "503") for key in refused
        ),
    }


def geometric_mean_interval(ratios: list[float]) -> tuple[float, float, float]:
    """The geometric mean of paired ratios and its 95% t-interval, taken on their logarithms:
    one window slowed by the host counts as much at 0.5 as at 2."""
    import math

    from scipy import stats

    logs = [math.log(ratio) for ratio in ratios]
    mean = sum(logs) / len(logs)
    low, high = stats.t.interval(0.95, len(logs) - 1, loc=mean, scale=stats.sem(logs))
    return math.exp(mean), math.exp(low), math.exp(high)


def paired_proxy_windows(
    *, direct: Server, proxied: Server, state, pairs: int, seconds: float, processes, log_dir
) -> dict[str, object]:
    """Normalize traffic alone, alternating between gunicorn direct and nginx in front of the
    same gunicorn, window by window (which goes first alternates too): the ratio of each pair's
    throughputs, and a 95% interval over the pairs, so the host's drift cancels out.

    The ratios are averaged as logarithms (``geometric_mean_interval``). A window each way
    first, not counted, lets the processes settle after the faults phase."""
    for name, server in [("direct", direct), ("nginx", proxied)]:
        run_phase(
            f"settling {name}", server=server, state=state, seconds=seconds,
            curators=False, faults=False, processes=processes, log_dir=log_dir,
        )  # fmt: skip
    ratios, rows = [], []
    for number in range(pairs):
        order = [("direct", direct), ("nginx", proxied)]
        if number % 2:
            order.reverse()
        rates = {}
        for name, server in order:
            row = run_phase(
                f"pair {number + 1} {name}", server=server, state=state, seconds=seconds,
                curators=False, faults=False, processes=processes, log_dir=log_dir,
            )  # fmt: skip
            rates[name] = row["normalize_per_s"]
            rows.append(row)
        ratios.append(rates["nginx"] / rates["direct"])
    mean, low, high = geometric_mean_interval(ratios)
    return {
        "pairs": pairs,
        "seconds_per_window": seconds,
        "nginx_vs_direct_ratios": [round(r, 3) for r in ratios],
        "nginx_vs_direct_mean": round(mean, 3),
        "nginx_vs_direct_95ci": [round(low, 3), round(high, 3)],
        "windows": rows,
    }
