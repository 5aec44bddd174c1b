"""Bulk normalization: a file of real job titles through the bulk job's service, in-process, and
the normalize API's batch throughput.

Builds a CSV of ``--rows`` rows (default 1,000,000) from real titles: O*NET's alternate titles
and JobBERT's vacancy titles (``../shared/data``), drawn at random with repeats (seeded), as a
year of job ads repeats its titles. Imports O*NET with the shipped model live on a scratch
PostgreSQL database, then runs ``bulk_job_execute`` on that file as a worker would: rows/s, the
peak resident memory of this process (model, index, Django and the job together), and the
progress seen after each chunk. Then POST /api/v1/taxonomies/onet/normalize through Django's
test client (in-process: no HTTP server) with 500 and 1,000 distinct realistic texts a request:
texts/s; and one text a request: p50 / p99 ms. ``--api-only`` measures just that (to run on an
older checkout for a before figure, which ``--before FILE`` then adds to the JSON).

    .venv/bin/python bench/bulk_job.py [--rows 1000000] [--chunk 2000] [--before FILE]

Prints a table and writes bench/results/bulk_job.json (``--api-only``: bench/results/
bulk_job_api.json). The scratch database is dropped at the end.
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
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _pg

_pg.scratch_database(broker="memory://")

from rest_framework.authtoken.models import Token  # noqa: E402

from annotations.services.accounts import user_ensure  # noqa: E402

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk", type=int, default=2000, help="rows a chunk (the default's)")
    parser.add_argument("--api-only", action="store_true")
    parser.add_argument("--before", type=Path, help="bulk_job_api.json of an older checkout")
    args = parser.parse_args()
    machine = (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )
    taxonomy = _pg.onet_live()
    texts = _pg.realistic_inputs(max(API_SIZES) * 2)
    results: dict = {"machine": machine, "commit": git_commit(), "model": "shipped O*NET model"}
    if args.api_only:
        results["api_batch"] = api_throughput(texts)
        out = ROOT / "bench" / "results" / "bulk_job_api.json"
        out.write_text(json.dumps(results, indent=2))
        print(json.dumps(results, indent=2))
        return

    from models_app.bulk import bulk_job_create, bulk_job_result
    from models_app.bulk_run import bulk_job_execute
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
