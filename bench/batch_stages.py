"""Where a 500-text normalize goes, stage by stage, on one core: what bounds the API's batch rate.

A scratch PostgreSQL database with O*NET and the shipped model live (as ``http_vs_minilm.py``);
real vacancy titles (JobBERT validation, seeded), ``--batches`` calls of 500 distinct titles
after one to warm up, each through ``rank_taxonomy_groups`` in this process with one BLAS and
one torch thread, as a gunicorn worker answers a request. Each stage's time is measured around
its function: the live pointer read, encoding, the search (of it, the float32 product), the
rows read, the candidates' evidence, and JSON of the answers; the rest is what is left.

    .venv/bin/python bench/batch_stages.py [--batches 8]

Prints a table and writes bench/results/batch_stages.json; the scratch database is dropped.
"""

from __future__ import annotations

import os

# One thread each, as ``siamweb.gunicorn_config`` runs a worker: set before numpy loads BLAS.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"

import argparse  # noqa: E402
import collections  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _pg  # noqa: E402

_pg.scratch_database(broker="memory://")

import torch  # noqa: E402

from bench.http_vs_minilm import BATCH, vacancy_titles  # noqa: E402
from models_app.serving import normalize  # noqa: E402
from models_app.siamese import exact_cosines  # noqa: E402
from models_app.siamese.networks.base import NeuralEncoder  # noqa: E402
from models_app.siamese.search import MemberSearch  # noqa: E402

# (owner of the function, its name, the stage it is timed as); the product runs inside the search.
STAGES = [
    (normalize, "live_engine_ranker_and_revision", "live pointer and revision"),
    (NeuralEncoder, "encode", "encode"),
    (MemberSearch, "search", "search"),
    (exact_cosines, "cosines", "  of it: the float32 product"),
    (normalize, "normalization_rows", "rows (hit members not yet kept)"),
    (normalize, "candidates_of_texts", "candidates and their evidence"),
]
NESTED = {"  of it: the float32 product"}


def timed(spent: collections.Counter, owner, name: str, stage: str) -> None:
    inner = getattr(owner, name)

    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[stage] += time.perf_counter() - started

    setattr(owner, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=8, help=f"{BATCH}-text calls measured")
    args = parser.parse_args()
    torch.set_num_threads(1)
    taxonomy = _pg.onet_live()
    titles = vacancy_titles(BATCH * (args.batches + 1))
    batches = [titles[i * BATCH : (i + 1) * BATCH] for i in range(args.batches + 1)]
    spent: collections.Counter = collections.Counter()
    for owner, name, stage in STAGES:
        timed(spent, owner, name, stage)

    normalize.rank_taxonomy_groups(taxonomy, batches[0], k=5)  # loads the engine, warms up
    spent.clear()
    total = 0.0
    for batch in batches[1:]:
        started = time.perf_counter()
        answers = normalize.rank_taxonomy_groups(taxonomy, batch, k=5)
        middle = time.perf_counter()
        json.dumps({"results": [answer.as_dict() for answer in answers]})
        spent["JSON of the answers"] += time.perf_counter() - middle
        total += time.perf_counter() - started

    per_call = {stage: seconds / args.batches * 1000 for stage, seconds in spent.items()}
    whole = total / args.batches * 1000
    outer = sum(ms for stage, ms in per_call.items() if stage not in NESTED)
    order = [stage for _, _, stage in STAGES] + ["JSON of the answers"]
    rows = [{"stage": stage, "ms": per_call.get(stage, 0.0)} for stage in order]
    rows.append({"stage": "the rest (ranking, answers, dedup)", "ms": whole - outer})
    rows.append({"stage": "a 500-text call, in all", "ms": whole})
    machine = _pg.machine()
    print(f"\nmachine: {machine}; load average {_pg.load_average()}")
    _pg.print_table(rows, ["stage", "ms"])
    print(f"{BATCH * 1000 / whole:,.0f} texts/s on one core, in process")
    _pg.write_results(
        "batch_stages",
        {
            "machine": machine,
            "taxonomy": "O*NET, the shipped model",
            "inputs": f"JobBERT vacancy titles (real), {args.batches} calls of {BATCH} after one",
            "threads": "1 BLAS, 1 torch",
            "ms_per_call": {row["stage"]: round(row["ms"], 1) for row in rows},
            "texts_per_s_one_core": round(BATCH * 1000 / whole, 1),
            "load_average_after": _pg.load_average(),
        },
    )


if __name__ == "__main__":
    main()
