"""Bulk normalization: a file of real job titles through the bulk job, in-process and fanned out
over real Celery worker processes, and the normalize API's batch throughput.

Builds a CSV of ``--rows`` rows (default 1,000,000) from real titles: O*NET's alternate titles
and JobBERT's vacancy titles (``../shared/data``), drawn at random with repeats (seeded), as a
year of job ads repeats its titles. Imports O*NET with the shipped model live on a scratch
PostgreSQL database, then:

- default: runs ``bulk_job_execute`` on that file in this process, one chunk after another:
  rows/s, the peak resident memory of this process (model, index, Django and the job together),
  and the progress seen after each chunk. Then POST /api/v1/taxonomies/onet/normalize through
  Django's test client (in-process: no HTTP server) with 500 and 1,000 distinct realistic texts
  a request: texts/s; and one text a request: p50 / p99 ms. ``--api-only`` measures just that.
- ``--workers 1,2``: for each count, starts that many ``celery worker --pool=solo`` processes
  (``--threads`` BLAS/torch threads each) on a Redis broker (``--broker``, default Redis
  database 13) and the scratch database, uploads the file as a job and times it from the upload
  stored to the result renamed whole: rows/s, the split's time, which worker did how many
  chunks, the progress and time left the job showed as it went. The workers are stopped after
  each count.

    .venv/bin/python bench/bulk_job.py [--rows 1000000] [--chunk 2000] [--before FILE]
    .venv/bin/python bench/bulk_job.py --workers 1,2 --threads 1 [--rows 1000000] [--out NAME]

Prints a table and writes bench/results/bulk_job.json (``--api-only``: bench/results/
bulk_job_api.json; ``--workers``: bench/results/bulk_fan_out.json, or ``--out``). The scratch
database is dropped at the end.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import platform
import random
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _pg

BROKER = "redis://127.0.0.1:6379/13"  # not the test suite's database 15, which tests flush
_BROKER_ARG = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--broker=")), BROKER)
_FAN_OUT = any(a.startswith("--workers") for a in sys.argv)
SCRATCH_URL = _pg.scratch_database(broker=_BROKER_ARG if _FAN_OUT else "memory://")

from rest_framework.authtoken.models import Token  # noqa: E402

from annotations.services.accounts import user_ensure  # noqa: E402
from siamweb.task_names import FAST_QUEUE  # noqa: E402

ROOT = _pg.ROOT
SHARED_DATA = ROOT.parent / "shared" / "data"
API_SIZES = (500, 1000)
API_REPEATS = 5
ONE_TEXT_REQUESTS = 300


def rss_mb() -> float:
    """The peak resident memory of this process so far (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    with Path("/proc/self/status").open() as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def real_titles() -> list[str]:
    titles = []
    with (SHARED_DATA / "onet" / "Alternate Titles.txt").open(encoding="utf-8") as handle:
        titles += [row["Alternate Title"] for row in csv.DictReader(handle, delimiter="\t")]
    with (SHARED_DATA / "jobbert" / "validation_titles.csv").open(encoding="utf-8") as handle:
        titles += [row["vacancyTitle"] for row in csv.DictReader(handle)]
    return [title.strip() for title in titles if title.strip()]


def write_file(path: Path, rows: int, seed: int = 20261126) -> int:
    """A CSV of ``rows`` rows drawn from the real titles with repeats; returns distinct titles."""
    rng = random.Random(seed)
    titles = real_titles()
    seen = set()
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["ad_id", "title", "posted"])
        for i in range(rows):
            title = rng.choice(titles)
            seen.add(title)
            writer.writerow([i, title, f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}"])
    return len(seen)


def api_throughput(texts: list[str]) -> dict:
    from django.test import Client

    user, _ = user_ensure(username="bench", password="bench-pass-123", admin=False)
    token, _ = Token.objects.get_or_create(user=user)
    client = Client(HTTP_AUTHORIZATION=f"Token {token.key}", HTTP_HOST="localhost")
    path = "/api/v1/taxonomies/onet/normalize"

    def post(batch: list[str]) -> float:
        started = time.perf_counter()
        response = client.post(path, {"texts": batch}, content_type="application/json")
        elapsed = time.perf_counter() - started
        assert response.status_code == 200, response.content[:500]
        return elapsed

    post(texts[:10])  # the engine loads on the first request
    figures = {}
    # One text a request, as a form or a single lookup sends it: the latency, not a rate.
    one = sorted(post([text]) * 1000 for text in texts[:ONE_TEXT_REQUESTS])
    figures["one_text_ms"] = {
        "p50": statistics.median(one),
        "p99": one[min(len(one) - 1, round(0.99 * (len(one) - 1)))],
        "requests": len(one),
    }
    for size in API_SIZES:
        seconds = [post(texts[(r * size) % len(texts) :][:size]) for r in range(API_REPEATS)]
        figures[str(size)] = {
            "texts_per_second": size / statistics.median(seconds),
            "median_seconds": statistics.median(seconds),
            "requests": API_REPEATS,
        }
    return figures


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        return ""


def start_workers(count: int, threads: int, chunk: int, log_dir: Path) -> list[subprocess.Popen]:
    """``count`` Celery worker processes on the scratch database, each running one task at a
    time with ``threads`` BLAS and torch threads; returned once every one is ready."""
    from django.conf import settings

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "siamweb.settings",
        "DATABASE_URL": SCRATCH_URL,
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "SIAMWEB_ARTIFACTS_DIR": str(settings.SIAMWEB_ARTIFACTS_DIR),
        "SIAMWEB_VAR_DIR": str(settings.VAR_DIR),
        "SIAMWEB_BULK_CHUNK_ROWS": str(chunk),
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "OPENBLAS_NUM_THREADS": str(threads),
        "LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
    }
    workers = []
    for number in range(count):
        log = log_dir / f"worker-{count}-{number}.log"
        process = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "siamweb", "worker", "--pool=solo",
                "--concurrency=1", "--loglevel=WARNING", "--without-mingle", "--without-gossip",
                "--without-heartbeat", f"--queues={FAST_QUEUE}",
                f"--hostname=bench-{uuid.uuid4().hex[:6]}@%h",
            ],
            cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        process.log = log
        workers.append(process)
    # Ready when the broker answers their pings (their logs stay quiet at WARNING).
    from celery import current_app

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        replies = current_app.control.ping(timeout=1.0) or []
        if len(replies) >= count:
            return workers
        if any(process.poll() is not None for process in workers):
            break
    tails = "\n".join(process.log.read_text()[-2000:] for process in workers)
    raise SystemExit(f"the workers did not start:\n{tails}")


def stop_workers(workers: list[subprocess.Popen]) -> None:
    for process in workers:
        process.send_signal(signal.SIGTERM)
    for process in workers:
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def fan_out(taxonomy, source: Path, counts: list[int], threads: int, chunk: int) -> dict:
    """The file as a bulk job on each number of worker processes, one count after another."""
    import redis
    from django.conf import settings

    from models_app.bulk.jobs import bulk_job_create, bulk_job_delete
    from models_app.bulk.selectors import bulk_job_result
    from models_app.models import BulkJob

    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()  # a scratch Redis database
    figures = {}
    for count in counts:
        workers = start_workers(count, threads, chunk, source.parent)
        pids = {process.pid: f"worker {n + 1}" for n, process in enumerate(workers)}
        try:
            started = time.perf_counter()
            with source.open("rb") as handle:
                job = bulk_job_create(
                    taxonomy=taxonomy, upload=handle, filename="ads.csv", column="title"
                )  # sent to the workers on commit (autocommit: at once)
            stored = time.perf_counter() - started
            samples, split_seconds = [], None
            while True:
                time.sleep(1.0)
                job.refresh_from_db()
                now = time.perf_counter() - started
                if split_seconds is None and job.chunks_total is not None:
                    split_seconds = now - stored
                samples.append((now, job.progress, job.eta_seconds, job.chunks_done))
                if len(samples) % 30 == 0:
                    print(f"  {count} worker(s): {job.rows_done:>11,} rows  {job.progress:6.1%}  "
                          f"ETA {job.eta_seconds or 0:6.0f} s  chunks {job.chunks_done:,}/"
                          f"{job.chunks_total or 0:,}")  # fmt: skip
                if job.status not in BulkJob.ACTIVE_STATUSES:
                    break
            seconds = time.perf_counter() - started - stored
            assert job.status == "succeeded", job.error
            done_by: dict[str, int] = {}
            for worker in job.chunks.values_list("worker", flat=True):
                name = pids.get(int(worker.rsplit(":", 1)[1]), worker)
                done_by[name] = done_by.get(name, 0) + 1
            # The time left the page showed a quarter, half and three quarters of the way in.
            etas = {}
            for share in (0.25, 0.5, 0.75):
                at = next((s for s in samples if s[1] >= share), None)
                if at is not None and at[2] is not None:
                    etas[f"{share:.0%}"] = {
                        "eta_seconds": round(at[2]),
                        "actual_seconds_left": round(seconds + stored - at[0]),
                    }
            figures[str(count)] = {
                "workers": count,
                "threads_per_worker": threads,
                "rows": job.rows_done,
                "chunk_rows": job.chunk_rows,
                "chunks": job.chunks_total,
                "upload_stored_seconds": stored,
                "seconds": seconds,
                "rows_per_second": job.rows_done / seconds,
                "split_seconds": split_seconds,
                "chunks_done_by": done_by,
                "chunk_attempts": sorted(set(job.chunks.values_list("attempts", flat=True))),
                "result_csv_mb": bulk_job_result(job, "csv").stat().st_size / 1e6,
                "result_jsonl_mb": bulk_job_result(job, "jsonl").stat().st_size / 1e6,
                "eta_seen": etas,
            }
            rate = job.rows_done / seconds
            print(f"{count} worker(s): {job.rows_done:,} rows in {seconds:,.1f} s: {rate:,.0f} "
                  f"rows/s (split {split_seconds or 0:.1f} s)")  # fmt: skip
            bulk_job_delete(job=job)  # gigabytes of results: gone before the next count
        finally:
            stop_workers(workers)
    if "1" in figures:
        for row in figures.values():
            row["speed_up_over_one"] = row["rows_per_second"] / figures["1"]["rows_per_second"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk", type=int, default=2000, help="rows a chunk (the default's)")
    parser.add_argument("--api-only", action="store_true")
    parser.add_argument("--before", type=Path, help="bulk_job_api.json of an older checkout")
    parser.add_argument("--workers", help="worker process counts to run the job on, e.g. 1,2")
    parser.add_argument("--threads", type=int, default=1, help="BLAS/torch threads a worker")
    parser.add_argument("--broker", default=BROKER, help="a Redis database of the benchmark's own")
    parser.add_argument("--out", default="bulk_fan_out", help="results file name (--workers)")
    args = parser.parse_args()
    machine = (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )
    taxonomy = _pg.onet_live()
    if args.workers:
        scratch = Path(tempfile.mkdtemp(prefix="siamweb-bulk-"))
        source = scratch / "ads.csv"
        started = time.perf_counter()
        distinct = write_file(source, args.rows)
        size_mb, took = source.stat().st_size / 1e6, time.perf_counter() - started
        print(f"wrote {args.rows:,} rows ({distinct:,} distinct titles, {size_mb:,.0f} MB) in "
              f"{took:.0f} s")  # fmt: skip
        counts = [int(count) for count in args.workers.split(",")]
        results = {
            "machine": machine,
            "commit": git_commit(),
            "model": "shipped O*NET model",
            "rows": args.rows,
            "distinct_titles": distinct,
            "input_mb": source.stat().st_size / 1e6,
            "load_average_before": os.getloadavg(),
            "fan_out": fan_out(taxonomy, source, counts, args.threads, args.chunk),
            "load_average_after": os.getloadavg(),
        }
        out = ROOT / "bench" / "results" / f"{args.out}.json"
        out.write_text(json.dumps(results, indent=2))
        print(json.dumps(results["fan_out"], indent=2))
        print(f"wrote {out.relative_to(ROOT)}")
        shutil.rmtree(scratch, ignore_errors=True)
        return
    texts = _pg.realistic_inputs(max(API_SIZES) * 2)
    results: dict = {"machine": machine, "commit": git_commit(), "model": "shipped O*NET model"}
    if args.api_only:
        results["api_batch"] = api_throughput(texts)
        out = ROOT / "bench" / "results" / "bulk_job_api.json"
        out.write_text(json.dumps(results, indent=2))
        print(json.dumps(results, indent=2))
        return

    from models_app.bulk.jobs import bulk_job_create
    from models_app.bulk.run import bulk_job_execute
    from models_app.bulk.selectors import bulk_job_result
    from models_app.serving.engines import live_engine

    scratch = Path(tempfile.mkdtemp(prefix="siamweb-bulk-"))
    source = scratch / "ads.csv"
    started = time.perf_counter()
    distinct = write_file(source, args.rows)
    print(f"wrote {args.rows:,} rows ({distinct:,} distinct titles) in "
          f"{time.perf_counter() - started:.0f} s")  # fmt: skip
    live_engine(taxonomy)  # what a worker holds before its first job
    rss_before = current_rss_mb()
    with source.open("rb") as handle:
        job = bulk_job_create(
            taxonomy=taxonomy, upload=handle, filename="ads.csv", column="title", enqueue=False
        )
    progress: list[tuple[float, float, float | None]] = []
    started = time.perf_counter()

    def seen(current) -> None:
        progress.append((time.perf_counter() - started, current.progress, current.eta_seconds))
        if len(progress) % 50 == 0:
            eta = current.eta_seconds or 0
            print(f"  {current.rows_done:>9,} rows  {current.progress:6.1%}  "
                  f"ETA {eta:5.0f} s  RSS {current_rss_mb():,.0f} MB")  # fmt: skip

    job = bulk_job_execute(job_id=job.id, chunk_rows=args.chunk, after_chunk=seen)
    seconds = time.perf_counter() - started
    assert job.status == "succeeded", job.error
    peak = rss_mb()
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(progress)]
    results["bulk_job"] = {
        "rows": job.rows_done,
        "distinct_titles": distinct,
        "chunk_rows": args.chunk,
        "seconds": seconds,
        "rows_per_second": job.rows_done / seconds,
        "input_mb": job.input_bytes / 1e6,
        "result_csv_mb": bulk_job_result(job, "csv").stat().st_size / 1e6,
        "result_jsonl_mb": bulk_job_result(job, "jsonl").stat().st_size / 1e6,
        "rss_before_job_mb": rss_before,
        "peak_rss_mb": peak,
        "checkpoints": len(progress),
        "longest_seconds_between_checkpoints": max(gaps) if gaps else seconds,
        "first_eta_seconds": progress[0][2] if progress else None,
    }
    results["api_batch"] = {"after": api_throughput(texts)}
    if args.before:
        before = json.loads(args.before.read_text())
        results["api_batch"]["before"] = {**before["api_batch"], "commit": before["commit"]}

    bulk = results["bulk_job"]
    print(f"machine: {machine}")
    print(f"{'measure':<40}{'value':>14}")
    for key in ("rows", "distinct_titles", "seconds", "rows_per_second", "rss_before_job_mb",
                "peak_rss_mb", "longest_seconds_between_checkpoints"):  # fmt: skip
        value = bulk[key]
        print(f"{'bulk job: ' + key:<40}{value:>14,.1f}" if isinstance(value, float)
              else f"{'bulk job: ' + key:<40}{value:>14,}")  # fmt: skip
    for label, figures in results["api_batch"].items():
        for size, row in figures.items():
            if isinstance(row, dict) and "texts_per_second" in row:
                print(f"{f'API {label}, {size} texts/request, texts/s':<40}"
                      f"{row['texts_per_second']:>14,.0f}")  # fmt: skip
            elif isinstance(row, dict):
                print(f"{f'API {label}, one text, p50 / p99 ms':<40}"
                      f"{row['p50']:>7.1f} /{row['p99']:>5.1f}")  # fmt: skip
    out = ROOT / "bench" / "results" / "bulk_job.json"
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
