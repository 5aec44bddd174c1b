"""The product under load and faults, on the embedded default and on PostgreSQL + Redis.

For each database: O*NET with the shipped model live, a few thousand inputs waiting for review,
then gunicorn 2x2, one Celery worker (prefork) and beat, started as the Procfile starts them
(beat's checks every 15 s here, not 300, so the benchmark sees several of them). Three phases of
``--seconds`` each, with 8 clients sending one text a request to POST …/normalize:

1. **idle**: normalize traffic alone.
2. **curators**: plus curators judging: ``--api-curators`` through the REST API (claim, verdict
   with an Idempotency-Key) and one through the htmx review page (logged in, the card's form);
   beat folds the verdicts' members into the index as they come (a swap in every web process).
3. **faults**: the same, and an admin asks for a fine-tune at the start; at a third of the phase
   the Celery worker is killed with SIGKILL (and a new one started), at two thirds gunicorn is
   stopped and started.

Curators retry a verdict that got no answer or a 503 with the same key, as the review page and
an API client should. Afterwards the run killed with its worker must be marked failed by the
scheduled check; the benchmark retries it through the API and waits for it to finish. Then:
every verdict that got a 2xx is stored exactly once, none is stored twice, every refusal is a
4xx or 503, and no run is left ``running``.

    .venv/bin/python bench/load_faults.py [--database sqlite postgres] [--seconds 45]
        [--api-curators 2]

Each database runs in a child process with its own scratch database (SQLite file in a temporary
folder with the filesystem broker; ``siamweb_bench_<pid>`` on PostgreSQL with Redis db 9), all
dropped at the end. Prints a table and writes bench/results/load_faults.json (or ``--results``).
The clients are in bench/load_faults_clients.py, one database's phases in
bench/load_faults_phases.py.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import load_faults_clients as clients  # noqa: E402
from bench.load_faults_clients import PASSWORD, Server  # noqa: E402
from bench.load_faults_phases import (  # noqa: E402
    NORMALIZE_CLIENTS,
    gunicorn_rss,
    paired_proxy_windows,
    run_phase,
    settle,
    verdict_accounting,
)

RESULTS = ROOT / "bench" / "results" / "load_faults.json"
REDIS_URL = "redis://127.0.0.1:6379/9"
HEARTBEAT_TIMEOUT = 30  # the smallest the settings allow
CHECK_SECONDS = 15


# --- setup, in the child process -------------------------------------------------------------


def prepare_database(database: str, scratch: Path) -> str:
    """Point the environment at a fresh database and broker, set Django up, load O*NET."""
    os.environ.update(
        {
            "SIAMWEB_VAR_DIR": str(scratch),
            "LOG_LEVEL": "WARNING",
            "SIAMWEB_REINDEX_CHECK_SECONDS": str(CHECK_SECONDS),
            "SIAMWEB_RUN_HEARTBEAT_TIMEOUT_SECONDS": str(HEARTBEAT_TIMEOUT),
            "SIAMWEB_FINETUNE_MAX_MINUTES": "0.5",
            # Fine-tunes only when the benchmark asks for one.
            "SIAMWEB_RETRAIN_MIN_VERDICTS": "1000000",
            "SIAMWEB_RETRAIN_CHECK_SECONDS": "3600",
        }
    )
    if database == "postgres":
        import redis

        redis.Redis.from_url(REDIS_URL).flushdb()
        from bench import _pg

        url = _pg.scratch_database(broker=REDIS_URL)
    else:
        url = f"sqlite:///{scratch / 'siamweb.sqlite3'}"
        os.environ["DATABASE_URL"] = url
        os.environ.pop("CELERY_BROKER_URL", None)  # the filesystem broker, as `make run`
        os.environ["DJANGO_SETTINGS_MODULE"] = "siamweb.settings"
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
    from annotations.services.taxonomy import taxonomy_import
    from models_app.training.run_execution import taxonomy_ensure_live

    report = taxonomy_import(slug="onet", path=ROOT / "data" / "onet", fmt="onet")
    taxonomy_ensure_live(taxonomy=report.taxonomy, shipped=ROOT / "data" / "models" / "onet")
    if database == "postgres":
        from bench import _pg

        _pg.vacuum_analyze()
    return url


def users_and_inputs(api_curators: int, inputs: int) -> dict[str, object]:
    from rest_framework.authtoken.models import Token

    from annotations.models import Taxonomy
    from annotations.services.accounts import user_ensure
    from annotations.services.review.inputs import inputs_submit
    from bench._pg import realistic_inputs

    admin, _ = user_ensure(username="bench-admin", password=PASSWORD, admin=True)
    tokens = []
    for number in range(api_curators):
        user, _ = user_ensure(username=f"bench-api-{number}", password=PASSWORD, admin=False)
        tokens.append(Token.objects.create(user=user).key)
    user_ensure(username="bench-page", password=PASSWORD, admin=False)
    texts = realistic_inputs(inputs)
    taxonomy = Taxonomy.objects.get(slug="onet")
    for start in range(0, len(texts), 500):
        inputs_submit(taxonomy=taxonomy, texts=texts[start : start + 500], source="api")
    return {
        "admin_token": Token.objects.create(user=admin).key,
        "curator_tokens": tokens,
        "texts": texts,
    }


# --- one database ----------------------------------------------------------------------------


def one_database(database: str, args) -> dict[str, object]:
    from django.db import connections

    from bench import _pg
    from bench._nginx import start_nginx, stop_nginx
    from bench._servers import free_port, start_celery, start_gunicorn, stop_celery, stop_gunicorn

    scratch = Path(tempfile.mkdtemp(prefix=f"siamweb-load-{database}-"))
    url = prepare_database(database, scratch)
    state = users_and_inputs(args.api_curators, args.inputs)
    state.update(killed_runs=[], verdicts={})
    machine = _pg.machine() if database == "postgres" else None
    connections.close_all()
    print(f"{database}: {url}; logs in {scratch}")

    direct = Server(free_port())
    processes = {
        "web": start_gunicorn(
            port=direct.web_port, workers=2, threads=2, torch_threads=1, log=scratch / "web.log"
        ),
        "worker": start_celery("worker", log=scratch / "worker.log"),
        "beat": start_celery(
            "beat", log=scratch / "beat.log", extra=(f"--schedule={scratch / 'beat-schedule'}",)
        ),
    }
    proxy = None
    server = direct
    if args.proxy == "nginx":
        proxy = start_nginx(scratch / "nginx", upstream_port=direct.web_port,
                            static_root=scratch / "staticfiles")  # fmt: skip
        server = Server(direct.web_port, proxy.https_port)
    try:
        warm = run_phase(
            "warm-up",
            server=server,
            state=state,
            seconds=15,
            curators=False,
            faults=False,
            processes=processes,
            log_dir=scratch,
        )
        rows = [
            run_phase(
                name,
                server=server,
                state=state,
                seconds=args.seconds,
                curators=curators,
                faults=faults,
                processes=processes,
                log_dir=scratch,
            )
            for name, curators, faults in [
                ("idle", False, False),
                ("curators", True, False),
                ("faults", True, True),
            ]
        ]
        settled = settle(state, server, limit_seconds=args.settle_seconds)
        rows[-1]["web_rss_mb_after_settle"] = gunicorn_rss(processes["web"])
        paired = None
        if proxy is not None and args.pairs:
            paired = paired_proxy_windows(
                direct=direct, proxied=server, state=state, pairs=args.pairs,
                seconds=args.pair_seconds, processes=processes, log_dir=scratch,
            )  # fmt: skip
    finally:
        if proxy is not None:
            stop_nginx(proxy)
        stop_gunicorn(processes["web"])
        stop_celery(processes["worker"])
        stop_celery(processes["beat"])
    accounting = verdict_accounting(state["verdicts"])
    connections.close_all()
    print(f"{database}: verdicts {accounting}; runs {settled}")
    return {
        "database": database,
        "proxy": args.proxy,
        "broker": "redis" if database == "postgres" else "filesystem",
        "server": "gunicorn 2x2 (gthread), one Celery worker (prefork, 1 child), beat"
        + (", nginx (deploy/nginx-siamweb.conf, HTTPS) in front" if proxy else ""),
        "nginx_vs_direct": paired,
        "machine": machine,
        "warm_up": warm,
        "phases": rows,
        "verdicts": accounting,
        "runs": settled,
    }


# --- the parent: one child process a database ----------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--database", nargs="+", choices=["sqlite", "postgres"], default=["sqlite", "postgres"]
    )
    parser.add_argument("--seconds", type=float, default=45.0, help="length of each phase")
    parser.add_argument("--api-curators", type=int, default=2)
    parser.add_argument(
        "--think-seconds", type=float, default=clients.THINK_SECONDS, help="each curator's pause"
    )
    parser.add_argument("--inputs", type=int, default=3000, help="inputs waiting for review")
    parser.add_argument("--settle-seconds", type=float, default=600.0)
    parser.add_argument(
        "--proxy", nargs="+", choices=["none", "nginx"], default=["none", "nginx"],
        help="clients straight to gunicorn, or through nginx as docs/deploying.md puts it",
    )  # fmt: skip
    parser.add_argument(
        "--pairs", type=int, default=10,
        help="through nginx: alternating windows, direct and proxied, for the throughput ratio",
    )  # fmt: skip
    parser.add_argument("--pair-seconds", type=float, default=8.0)
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the JSON goes")
    parser.add_argument("--one", choices=["sqlite", "postgres"], help=argparse.SUPPRESS)
    parser.add_argument("--one-proxy", choices=["none", "nginx"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    clients.THINK_SECONDS = args.think_seconds

    if args.one:
        # A child: Django can be set up for one database per process.
        args.proxy = args.one_proxy
        result = one_database(args.one, args)
        args.out.write_text(json.dumps(result, indent=2, default=str))
        return

    results = []
    for database, proxy in [(d, p) for d in args.database for p in args.proxy]:
        out = Path(tempfile.mkstemp(suffix=".json")[1])
        command = [
            sys.executable,
            __file__,
            "--one",
            database,
            "--one-proxy",
            proxy,
            "--pairs",
            str(args.pairs),
            "--pair-seconds",
            str(args.pair_seconds),
            "--out",
            str(out),
            "--seconds",
            str(args.seconds),
            "--api-curators",
            str(args.api_curators),
            "--think-seconds",
            str(args.think_seconds),
            "--inputs",
            str(args.inputs),
            "--settle-seconds",
            str(args.settle_seconds),
        ]
        subprocess.run(command, check=True)
        results.append(json.loads(out.read_text()))
        out.unlink()
    report(results, args)


def report(results: list[dict], args) -> None:
    from bench import _pg

    rows = []
    for result in results:
        idle = next(row for row in result["phases"] if row["phase"] == "idle")
        for row in result["phases"]:
            statuses = row["normalize_statuses"]
            rows.append(
                {
                    "database": result["database"],
                    "proxy": result["proxy"],
                    "phase": row["phase"],
                    "normalize_per_s": row["normalize_per_s"],
                    "vs_idle": round(row["normalize_per_s"] / idle["normalize_per_s"], 2),
                    "p50_ms": row.get("p50_ms"),
                    "p99_ms": row.get("p99_ms"),
                    "p99_vs_idle": round(row.get("p99_ms", 0) / idle["p99_ms"], 2),
                    "not_200": sum(n for status, n in statuses.items() if status != "200"),
                    "no_answer": statuses.get("no answer", 0),
                    "503": statuses.get("503", 0),
                    "other_5xx": sum(
                        n for status, n in statuses.items() if status[0] == "5" and status != "503"
                    ),
                    "verdicts_2xx": sum(
                        n for o, n in row.get("verdict_outcomes", {}).items() if o in ("200", "201")
                    ),
                    "verdict_retries": row.get("verdict_retries"),
                    "web_rss_mb": row["web_rss_mb"],
                }
            )
    _pg.print_table(rows, list(rows[0]))
    for result in results:
        name = f"{result['database']}, {result['proxy']}"
        print(f"{name}: verdicts {result['verdicts']}")
        print(f"{name}: runs {result['runs']}")
        if result["nginx_vs_direct"]:
            paired = result["nginx_vs_direct"]
            print(
                f"{name}: normalize/s through nginx / direct, geometric mean of {paired['pairs']} "
                f"paired windows: "
                f"{paired['nginx_vs_direct_mean']} (95% CI {paired['nginx_vs_direct_95ci']})"
            )
    args.results.write_text(
        json.dumps(
            {
                "command": "bench/load_faults.py " + " ".join(sys.argv[1:]),
                "seconds_per_phase": args.seconds,
                "normalize_clients": NORMALIZE_CLIENTS,
                "api_curators": args.api_curators,
                "curator_think_seconds": args.think_seconds,
                "page_curators": 1,
                "rows": rows,
                "results": results,
            },
            indent=2,
            default=str,
        )
        + "\n"
    )
    print(f"wrote {args.results}")


if __name__ == "__main__":
    main()
