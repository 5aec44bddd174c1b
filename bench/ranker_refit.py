"""What a ranker refit costs the ranker worker, with 10,000 verdicts: the product's own
``ranker_fit`` (read the judged texts, search them, the gate's fit and comparison, the fit on
every verdict, store and make live), timed by stage.

O*NET 27.0 with the shipped model, as ``make run`` serves it. The verdicts are real vacancy
titles of the curator stream labelled through Nesta's crosswalk (``bench/ranker.py``,
``onet_taxonomy``), confirmed where the answer was right and reassigned where not; the stream
has about 5,200 distinct titles, so the rest up to ``--verdicts`` are the same titles with a
job-ad suffix (this measures time, not accuracy). A second refit after 20 more verdicts is
timed too (what beat starts every ``SIAMWEB_RANKER_REFIT_VERDICTS``), and a third after the
scheduled reindex has folded the verdicts' members into the index, as it does every
``SIAMWEB_REINDEX_CHECK_SECONDS``.

    .venv/bin/python bench/ranker_refit.py [--verdicts 10000]

Runs against a scratch PostgreSQL database (siamweb_bench_<pid>, dropped at exit; the server is
BENCH_POSTGRES_URL, default the local postgres superuser) with Celery's in-memory broker.
Prints a table and writes bench/results/ranker_refit.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import _pg  # noqa: E402

_pg.scratch_database(broker="memory://")

from annotations.models import Group  # noqa: E402
from annotations.services.accounts import user_ensure  # noqa: E402
from annotations.services.review.inputs import inputs_submit  # noqa: E402
from annotations.services.review.verdicts import judgement_create  # noqa: E402
from annotations.services.taxonomy import taxonomy_import  # noqa: E402
from bench.jobbert_data import SHARED_DATA  # noqa: E402
from bench.ranker import onet_taxonomy  # noqa: E402
from models_app.siamese.text import comparison_key  # noqa: E402
from models_app.training import ranker_training  # noqa: E402
from models_app.training.run_execution import training_run_execute  # noqa: E402
from models_app.training.services.builds import model_version_import  # noqa: E402
from models_app.training.services.indexes import deployment_activate, index_build_create  # noqa: E402
from models_app.training.services.runs import training_run_request  # noqa: E402

OUT = ROOT / "bench" / "results" / "ranker_refit.json"
SUFFIXES = ["", " (m/f/d)", " - remote", " full time", " (junior)", " - contract"]


def timed_stages() -> dict[str, float]:
    """Wrap ``ranker_fit``'s stages so each one's seconds add up in the returned dict."""
    seconds: dict[str, float] = {}
    for name in ("judged_texts", "_prepare", "_gate", "_examples", "fit_ranker", "_store"):
        original = getattr(ranker_training, name)

        def wrapper(*args, __original=original, __name=name, **kwargs):
            started = time.perf_counter()
            try:
                return __original(*args, **kwargs)
            finally:
                seconds[__name] = seconds.get(__name, 0.0) + time.perf_counter() - started

        setattr(ranker_training, name, wrapper)
    return seconds


def give_verdicts(taxonomy, user, titles: list[tuple[str, str]]) -> None:
    """Each (text, code) as a verdict: confirmed where the prediction was right."""
    groups = {g.code: g for g in Group.objects.filter(taxonomy=taxonomy)}
    for start in range(0, len(titles), 500):
        chunk = titles[start : start + 500]
        items = inputs_submit(taxonomy=taxonomy, texts=[t for t, _ in chunk], source="api")
        for item, (_, code) in zip(items, chunk, strict=True):
            gold = groups[code]
            verdict = "confirm" if item.top_group_id == gold.id else "reassign"
            judgement_create(review_item=item, user=user, verdict=verdict, group=gold)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--verdicts", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()

    taxonomy = taxonomy_import(slug="onet", path=ROOT / "data" / "onet", fmt="onet").taxonomy
    version = model_version_import(taxonomy=taxonomy, folder=ROOT / "data" / "models" / "onet")
    deployment_activate(index_build=index_build_create(model_version=version))
    curator, _ = user_ensure(username="bench-curator", password="bench", admin=False)
    bench_taxonomy = onet_taxonomy(args.data)
    seen, titles = set(), []
    for suffix in SUFFIXES:
        for text, group in bench_taxonomy.stream:
            key = comparison_key(text + suffix)
            if key not in seen and len(titles) < args.verdicts:
                seen.add(key)
                titles.append((text + suffix, bench_taxonomy.codes[group]))
    started = time.perf_counter()
    give_verdicts(taxonomy, curator, titles[:-40])
    print(f"{len(titles) - 40} verdicts given in {time.perf_counter() - started:.0f} s", flush=True)

    seconds = timed_stages()
    rows = []
    steps = (
        (f"first fit on {len(titles) - 40} verdicts, none indexed yet", [], False),
        ("refit after 20 more", titles[-40:-20], False),
        (
            "refit after 20 more, the scheduled reindex having folded the others in",
            titles[-20:],
            True,
        ),
    )
    for label, more, reindex in steps:
        if reindex:
            run = training_run_request(taxonomy=taxonomy, kind="reindex", enqueue=False)
            training_run_execute(run_id=run.id)
        if more:
            give_verdicts(taxonomy, curator, more)
        seconds.clear()
        started = time.perf_counter()
        fitted = ranker_training.ranker_fit(taxonomy=taxonomy)
        total = time.perf_counter() - started
        rows.append({
            "fit": label, "seconds": round(total, 1),
            "stages": {k.strip("_"): round(v, 2) for k, v in seconds.items()},
            "status": fitted.status if fitted else None,
            "verdicts": fitted.verdicts if fitted else None,
        })  # fmt: skip
        print(f"{label}: {total:.1f} s  {rows[-1]['stages']}  ({rows[-1]['status']})", flush=True)

    report = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "taxonomy": "O*NET 27.0, shipped n-gram model",
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
