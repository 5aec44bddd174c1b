"""Speed on the bundled O*NET taxonomy with the shipped model (data/models/onet).

Measures: import of all O*NET strings, loading the shipped model and building its index, batch
encoding, single-text normalize latency (model and index loaded, through the same code the API
uses), normalize of 500 texts a call, the API round-trip through Django's test client, and the
peak memory of this process, which holds what a web process holds. With --model tfidf the
TF-IDF encoder is fitted instead.
Prints a table and writes bench/results/normalize_speed.json.

    .venv/bin/python bench/normalize_speed.py [--queries 500] [--model shipped|tfidf]

Runs against a scratch SQLite database and artifacts folder; touches nothing of yours.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
scratch = tempfile.mkdtemp(prefix="siamweb-bench-")
os.environ.update(
    {
        "DJANGO_SETTINGS_MODULE": "siamweb.settings",
        "SIAMWEB_VAR_DIR": scratch,
        "DATABASE_URL": "",
        "CELERY_BROKER_URL": "filesystem://",
        "LOG_LEVEL": "WARNING",
    }
)

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402

from annotations.models import Member  # noqa: E402
from annotations.services.accounts import user_ensure  # noqa: E402
from annotations.services.taxonomy import taxonomy_import  # noqa: E402
from models_app.models import ModelVersion  # noqa: E402
from models_app.serving.engines import live_engine  # noqa: E402
from models_app.serving.normalize import rank_taxonomy_groups  # noqa: E402
from models_app.training.services.builds import model_version_fit, model_version_import  # noqa: E402
from models_app.training.services.indexes import deployment_activate, index_build_create  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--model", choices=["shipped", "tfidf"], default="shipped")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    results: dict[str, float] = {}

    started = time.perf_counter()
    report = taxonomy_import(slug="onet", path=ROOT / "data" / "onet", fmt="onet")
    results["import_seconds"] = time.perf_counter() - started
    results["members"] = report.members_created
    taxonomy = report.taxonomy

    started = time.perf_counter()
    if args.model == "shipped":
        version = model_version_import(taxonomy=taxonomy, folder=ROOT / "data" / "models" / "onet")
        results["model_load_seconds"] = time.perf_counter() - started
    else:
        version = model_version_fit(taxonomy=taxonomy, spec={})
        results["fit_seconds"] = time.perf_counter() - started
    started = time.perf_counter()
    build = index_build_create(model_version=version)
    results["index_build_seconds"] = time.perf_counter() - started
    deployment_activate(index_build=build)

    engine = live_engine(taxonomy)
    texts = list(Member.objects.values_list("text", flat=True)[:20000])
    started = time.perf_counter()
    engine.encoder.encode(texts)
    results["batch_encode_per_second"] = len(texts) / (time.perf_counter() - started)

    demo = [
        line.strip()
        for line in (ROOT / "data" / "demo_inputs.txt").read_text().splitlines()
        if line.strip()
    ]
    queries = [demo[i % len(demo)] for i in range(args.queries)]
    rank_taxonomy_groups(taxonomy, queries[:5], k=5)  # warm caches
    latencies = []
    for text in queries:
        started = time.perf_counter()
        rank_taxonomy_groups(taxonomy, [text], k=5)
        latencies.append((time.perf_counter() - started) * 1000)
    results["normalize_p50_ms"] = statistics.median(latencies)
    results["normalize_p99_ms"] = percentile(latencies, 0.99)
    # 500 distinct texts a call, as a request of 500 texts asks; the best of three calls.
    batch = [f"{demo[i % len(demo)]} {i}" for i in range(500)]
    seconds = []
    for _ in range(3):
        started = time.perf_counter()
        rank_taxonomy_groups(taxonomy, batch, k=5)
        seconds.append(time.perf_counter() - started)
    results["normalize_500_texts_per_second"] = len(batch) / min(seconds)

    user, _ = user_ensure(username="bench", password="bench-pass-123", admin=False)
    token = Token.objects.create(user=user)
    client = Client(HTTP_AUTHORIZATION=f"Token {token.key}", HTTP_HOST="localhost")
    api = []
    for text in queries[: max(50, args.queries // 5)]:
        started = time.perf_counter()
        response = client.post(
            "/api/v1/taxonomies/onet/normalize",
            {"texts": [text]},
            content_type="application/json",
        )
        api.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.content
    results["api_p50_ms"] = statistics.median(api)
    results["api_p99_ms"] = percentile(api, 0.99)
    results["model"] = f"{version.encoder_kind} ({ModelVersion.objects.get().label})"
    # ru_maxrss is in KiB on Linux: the peak of this process, model, index and Django loaded.
    results["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    machine = (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )
    print(f"machine: {machine}")
    print(f"{'measure':<28}{'value':>12}")
    for key, value in results.items():
        shown = f"{value:,.1f}" if isinstance(value, float) else str(value)
        print(f"{key:<28}{shown:>12}")
    out = ROOT / "bench" / "results" / "normalize_speed.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"machine": machine, **results}, indent=2))
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
