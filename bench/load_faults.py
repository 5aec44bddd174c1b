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
dropped at the end. Prints a table and writes bench/results/load_faults.json.
"""

from __future__ import annotations

import argparse
import collections
import http.client
import http.cookiejar
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results" / "load_faults.json"
NORMALIZE_CLIENTS = 8
NORMALIZE_PATH = "/api/v1/taxonomies/onet/normalize"
REDIS_URL = "redis://127.0.0.1:6379/9"
PASSWORD = "bench-pass-123"
# What a real client does with a verdict that got no answer or a 503: the same request again.
VERDICT_ATTEMPTS = 8
HEARTBEAT_TIMEOUT = 30  # the smallest the settings allow
# A curator's pause between verdicts: a fast one reads a card in a second (--think-seconds).
THINK_SECONDS = 1.0
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
    from models_app.services import taxonomy_ensure_live

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
    from annotations.services.review import inputs_submit
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


# --- clients ---------------------------------------------------------------------------------


class Server:
    """Where the clients send their requests; the port survives a restart of gunicorn."""

    def __init__(self, port: int) -> None:
        self.port = port

    def connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)


def _json_request(connection, method: str, path: str, token: str, body=None, headers=None):
    all_headers = {"Host": "localhost", "Authorization": f"Token {token}", **(headers or {})}
    payload = None
    if body is not None:
        payload = json.dumps(body)
        all_headers["Content-Type"] = "application/json"
    connection.request(method, path, body=payload, headers=all_headers)
    response = connection.getresponse()
    data = response.read()
    return response.status, data


class Recorder:
    """What the clients saw, merged under a lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.statuses: collections.Counter[str] = collections.Counter()
        self.verdicts: dict[str, str] = {}  # idempotency key → final outcome
        self.verdict_statuses: collections.Counter[str] = collections.Counter()
        self.verdict_retries = 0

    def normalize(self, status: str, latency_ms: float | None) -> None:
        with self.lock:
            self.statuses[status] += 1
            if latency_ms is not None:
                self.latencies.append(latency_ms)

    def verdict(self, key: str, outcome: str, statuses: list[str]) -> None:
        with self.lock:
            self.verdicts[key] = outcome
            self.verdict_statuses.update(statuses)
            self.verdict_retries += len(statuses) - 1


def normalize_client(server: Server, token: str, texts, stop: threading.Event, rec: Recorder):
    rng = random.Random()
    connection = server.connection()
    while not stop.is_set():
        began = time.perf_counter()
        try:
            status, _ = _json_request(
                connection, "POST", NORMALIZE_PATH, token, {"texts": [rng.choice(texts)]}
            )
        except (OSError, http.client.HTTPException):
            rec.normalize("no answer", None)
            connection.close()
            connection = server.connection()
            time.sleep(0.2)
            continue
        latency = (time.perf_counter() - began) * 1000
        rec.normalize(str(status), latency if status == 200 else None)
    connection.close()


def _send_verdict(server: Server, send) -> tuple[str, list[str]]:
    """Send until an answer other than "no answer" or 503; the final outcome and every status."""
    statuses: list[str] = []
    for attempt in range(VERDICT_ATTEMPTS):
        try:
            status = str(send())
        except (OSError, http.client.HTTPException):
            status = "no answer"
        statuses.append(status)
        if status not in ("no answer", "503"):
            return status, statuses
        time.sleep(min(0.5 * 2**attempt, 5))
    return statuses[-1], statuses


def api_curator(server: Server, token: str, stop: threading.Event, rec: Recorder) -> None:
    rng = random.Random()
    connection = server.connection()

    def reconnect():
        nonlocal connection
        connection.close()
        connection = server.connection()

    while not stop.is_set():
        try:
            status, data = _json_request(
                connection, "POST", "/api/v1/review-items/claim", token, {"taxonomy": "onet"}
            )
        except (OSError, http.client.HTTPException):
            reconnect()
            time.sleep(0.5)
            continue
        if status != 200:
            time.sleep(0.5)
            continue
        item = json.loads(data)
        key = uuid.uuid4().hex
        verdict = "confirm" if rng.random() < 0.85 else "skip"
        body = {"review_item": item["id"], "verdict": verdict}

        def send(body=body, key=key):
            try:
                status, _ = _json_request(
                    connection, "POST", "/api/v1/judgements", token, body, {"Idempotency-Key": key}
                )
            except (OSError, http.client.HTTPException):
                reconnect()
                raise
            return status

        outcome, statuses = _send_verdict(server, send)
        rec.verdict(f"api:{key}", outcome, statuses)
        stop.wait(THINK_SECONDS)
    connection.close()


CARD_FORM = re.compile(
    r'action="(/review/items/(\d+)/judge)[^"]*"[^>]*>.*?name="prediction_id" value="(\d+)".*?'
    r'name="idempotency_key" value="([^"]+)"',
    re.S,
)


def page_curator(server: Server, stop: threading.Event, rec: Recorder) -> None:
    """A curator on the htmx review page: log in, then confirm card after card."""
    base = f"http://127.0.0.1:{server.port}"
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))

    def csrf() -> str:
        return next((c.value for c in jar if c.name == "csrftoken"), "")

    def call(path: str, data: dict | None = None) -> tuple[int, str]:
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        request = urllib.request.Request(base + path, data=body)
        request.add_header("HX-Request", "true")
        if data is not None:
            request.add_header("X-CSRFToken", csrf())
        try:
            with opener.open(request, timeout=60) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")

    logged_in = False
    page = ""
    while not stop.is_set():
        try:
            if not logged_in:
                call("/accounts/login/")
                status, _ = call(
                    "/accounts/login/",
                    {"username": "bench-page", "password": PASSWORD, "csrfmiddlewaretoken": csrf()},
                )
                # A failed login answers 200 with the form again: the session cookie tells.
                logged_in = status == 200 and any(c.name == "sessionid" for c in jar)
                page = ""
            if not page:
                status, page = call("/review/")
            card = CARD_FORM.search(page)
        except OSError:
            logged_in = False
            time.sleep(0.5)
            continue
        if card is None:
            page = ""
            time.sleep(0.5)
            continue
        judge_url, _item_id, prediction_id, key = card.groups()
        form = {
            "verdict": "confirm",
            "prediction_id": prediction_id,
            "idempotency_key": key,
            "csrfmiddlewaretoken": csrf(),
        }
        answer: dict[str, str] = {}

        def send(form=form, judge_url=judge_url, answer=answer):
            status, answer["page"] = call(judge_url, form)
            return status

        outcome, statuses = _send_verdict(server, send)
        rec.verdict(f"page:{key}", outcome, statuses)
        stop.wait(THINK_SECONDS)
        page = answer.get("page", "") if outcome == "200" else ""


# --- one database ----------------------------------------------------------------------------


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
        status, _ = _json_request(
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
            port=server.port, workers=2, threads=2, torch_threads=1, log=log_dir / "web.log"
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
                status, data = _json_request(
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


def one_database(database: str, args) -> dict[str, object]:
    from django.db import connections

    from bench import _pg
    from bench._servers import free_port, start_celery, start_gunicorn, stop_celery, stop_gunicorn

    scratch = Path(tempfile.mkdtemp(prefix=f"siamweb-load-{database}-"))
    url = prepare_database(database, scratch)
    state = users_and_inputs(args.api_curators, args.inputs)
    state.update(killed_runs=[], verdicts={})
    machine = _pg.machine() if database == "postgres" else None
    connections.close_all()
    print(f"{database}: {url}; logs in {scratch}")

    server = Server(free_port())
    processes = {
        "web": start_gunicorn(
            port=server.port, workers=2, threads=2, torch_threads=1, log=scratch / "web.log"
        ),
        "worker": start_celery("worker", log=scratch / "worker.log"),
        "beat": start_celery(
            "beat", log=scratch / "beat.log", extra=(f"--schedule={scratch / 'beat-schedule'}",)
        ),
    }
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
    finally:
        stop_gunicorn(processes["web"])
        stop_celery(processes["worker"])
        stop_celery(processes["beat"])
    accounting = verdict_accounting(state["verdicts"])
    connections.close_all()
    print(f"{database}: verdicts {accounting}; runs {settled}")
    return {
        "database": database,
        "broker": "redis" if database == "postgres" else "filesystem",
        "server": "gunicorn 2x2 (gthread), one Celery worker (prefork, 1 child), beat",
        "machine": machine,
        "warm_up": warm,
        "phases": rows,
        "verdicts": accounting,
        "runs": settled,
    }


# --- the parent: one child process a database ----------------------------------------------------


def main() -> None:
    global THINK_SECONDS
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--database", nargs="+", choices=["sqlite", "postgres"], default=["sqlite", "postgres"]
    )
    parser.add_argument("--seconds", type=float, default=45.0, help="length of each phase")
    parser.add_argument("--api-curators", type=int, default=2)
    parser.add_argument(
        "--think-seconds", type=float, default=THINK_SECONDS, help="each curator's pause"
    )
    parser.add_argument("--inputs", type=int, default=3000, help="inputs waiting for review")
    parser.add_argument("--settle-seconds", type=float, default=600.0)
    parser.add_argument("--one", choices=["sqlite", "postgres"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    THINK_SECONDS = args.think_seconds

    if args.one:
        # A child: Django can be set up for one database per process.
        result = one_database(args.one, args)
        args.out.write_text(json.dumps(result, indent=2, default=str))
        return

    results = []
    for database in args.database:
        out = Path(tempfile.mkstemp(suffix=".json")[1])
        command = [
            sys.executable,
            __file__,
            "--one",
            database,
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
                    "phase": row["phase"],
                    "normalize_per_s": row["normalize_per_s"],
                    "vs_idle": round(row["normalize_per_s"] / idle["normalize_per_s"], 2),
                    "p50_ms": row.get("p50_ms"),
                    "p99_ms": row.get("p99_ms"),
                    "p99_vs_idle": round(row.get("p99_ms", 0) / idle["p99_ms"], 2),
                    "not_200": sum(n for status, n in statuses.items() if status != "200"),
                    "5xx": sum(n for status, n in statuses.items() if status.startswith("5")),
                    "verdicts_2xx": sum(
                        n for o, n in row.get("verdict_outcomes", {}).items() if o in ("200", "201")
                    ),
                    "verdict_retries": row.get("verdict_retries"),
                    "web_rss_mb": row["web_rss_mb"],
                }
            )
    _pg.print_table(rows, list(rows[0]))
    for result in results:
        print(f"{result['database']}: verdicts {result['verdicts']}")
        print(f"{result['database']}: runs {result['runs']}")
    RESULTS.write_text(
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
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
