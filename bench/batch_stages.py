"""Where a 500-text normalize goes, stage by stage, on one core, each stage beside its floor on
this machine: what bounds the API's batch rate, and how far each stage is from its limit.

A scratch PostgreSQL database with a taxonomy live: O*NET with the shipped model (the n-gram
student), or with ``--taxonomy esco`` ESCO (32,878 labels) with the pretrained tower as a new
taxonomy serves it. Real vacancy titles (JobBERT validation, seeded), ``--batches`` calls of 500
distinct titles after one to warm up, each through ``rank_taxonomy_groups`` in this process
with one BLAS and one torch thread, as a gunicorn worker answers a request. Each stage's time
is measured around its function: the live pointer read, encoding (of it, tokenising or hashing
n-grams), the search (of it, the float32 product), the rows read, the candidates' evidence, and
JSON of the answers; the rest is what is left.

Each stage's wall time and this thread's CPU time (on a shared machine other processes stretch
the first, not the second); the floors are CPU time too. Floors, each measured here: a database
read is one ``SELECT 1`` round trip (wall); the float32 product is its exact FLOPs (2 x texts x
members x dimensions) at numpy's float32 matrix-product rate a CPU second on this thread (the
best of a few 1024-square products); the encoder is its arithmetic (the tower: 2 x tokens x its
weight matrices plus attention; the n-gram bag: one add an n-gram a dimension plus its
projection) at the same rate; JSON is the answers' bytes at the rate ``json.dumps`` writes
their values as one flat list. Stages with no floor worked out show none.

    .venv/bin/python bench/batch_stages.py [--taxonomy onet|esco] [--batches 8] [--results NAME]

Prints a table and writes bench/results/batch_stages.json (``batch_stages_esco.json`` for
ESCO, or NAME.json); the scratch database is dropped.
"""

from __future__ import annotations

import os

# One thread each, as ``deploy/gunicorn.conf.py`` runs a worker: set before numpy loads BLAS.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"

import argparse  # noqa: E402
import collections  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _pg  # noqa: E402

_pg.scratch_database(broker="memory://")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from bench.http_vs_minilm import BATCH, vacancy_titles  # noqa: E402
from bench.jobbert_data import SHARED_DATA  # noqa: E402
from models_app.serving import engines, normalize  # noqa: E402
from models_app.siamese import exact_cosines  # noqa: E402
from models_app.siamese.search import MemberSearch  # noqa: E402

ENCODE = "encode"
FEATURIZE = "  of it: tokenise or hash n-grams (Python)"
SEARCH = "search"
PRODUCT = "  of it: the float32 product"
POINTER = "live pointer and revision"
ROWS = "rows (hit members not yet kept)"
CANDIDATES = "candidates and their evidence"
JSON_STAGE = "JSON of the answers"
REST = "the rest (ranking, answers, dedup)"
WHOLE = "a 500-text call, in all"
# (owner of the function, its name, the stage it is timed as); the encoder's own are wrapped
# once the engine is loaded (its class is the served encoder's).
STAGES = [
    (normalize, "live_engine_ranker_and_revision", POINTER),
    (MemberSearch, "search", SEARCH),
    (exact_cosines, "cosines", PRODUCT),
    (normalize, "normalization_rows", ROWS),
    (normalize, "candidates_of_texts", CANDIDATES),
]
NESTED = {FEATURIZE, PRODUCT}
ORDER = [POINTER, ENCODE, FEATURIZE, SEARCH, PRODUCT, ROWS, CANDIDATES, JSON_STAGE]


# This thread's CPU time a stage, beside its wall time: on a shared machine other processes
# stretch the wall time of every stage, not the CPU time this one spends (PostgreSQL's work in
# its own process is the difference for the reads).
cpu_spent: collections.Counter = collections.Counter()


def timed(spent: collections.Counter, owner, name: str, stage: str) -> None:
    inner = getattr(owner, name)

    def wrapper(*args, **kwargs):
        started, cpu_started = time.perf_counter(), time.thread_time()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[stage] += time.perf_counter() - started
            cpu_spent[stage] += time.thread_time() - cpu_started

    setattr(owner, name, wrapper)


def esco_live():
    """Import ESCO and serve it as a new taxonomy does: the pretrained tower (the title tower)."""
    from annotations.services.taxonomy import taxonomy_import
    from models_app.training.run_execution import training_run_execute
    from models_app.training.services.runs import taxonomy_model_refresh

    started = time.perf_counter()
    # 18 of ESCO's rows hold a label the importer refuses: those labels are left out, as an
    # admin's import with skip_bad_rows leaves them.
    report = taxonomy_import(slug="esco", path=SHARED_DATA / "esco", fmt="esco", skip_bad_rows=True)
    run = training_run_execute(run_id=taxonomy_model_refresh(taxonomy=report.taxonomy).id)
    assert run.status == "succeeded", run.error
    print(
        f"ESCO: {report.members_created:,} members, the pretrained tower live "
        f"({time.perf_counter() - started:.1f} s, one thread)"
    )
    _pg.vacuum_analyze()
    return report.taxonomy


# -- floors ----------------------------------------------------------------------------------


def gemm_gflops() -> float:
    """numpy's float32 matrix-product rate a second of this thread's CPU time (one BLAS
    thread): the best of five 1024-square products."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 1024), dtype=np.float32)
    b = rng.standard_normal((1024, 1024), dtype=np.float32)
    best = float("inf")
    for _ in range(5):
        started = time.thread_time()
        a @ b
        best = min(best, time.thread_time() - started)
    return 2 * 1024**3 / best / 1e9


def encoder_gflop(encoder, texts: list[str]) -> float | None:
    """The arithmetic of encoding ``texts`` once, padding left out (GFLOP); None for an
    encoder without a model of it here."""
    features = encoder.featurize(texts)
    if encoder.kind == "transformer":
        config = encoder.model[0].auto_model.config
        # BERT's pooler is never run: sentence-transformers pools the tokens itself.
        weights = sum(
            module.in_features * module.out_features
            for name, module in encoder.named_modules()
            if isinstance(module, torch.nn.Linear) and "pooler" not in name
        )
        tokens = features["attention_mask"].sum(dim=1).double()
        # Q K^T and the weighted sum of V: 2 x 2 x tokens^2 x hidden a layer.
        attention = float((4 * tokens**2).sum()) * config.hidden_size * config.num_hidden_layers
        return (2 * float(tokens.sum()) * weights + attention) / 1e9
    if encoder.kind == "ngram_bag":
        config = encoder.config
        adds = features["ids"].numel() * config.embedding_dim
        projection = 2 * len(texts) * config.embedding_dim * config.output_dim
        return (adds + projection) / 1e9
    return None


def json_mb_per_s(payload: dict) -> float:
    """How fast ``json.dumps`` writes the answers' values as one flat list (MB/s): JSON's own
    cost with no dictionaries to walk."""
    values: list = []

    def leaves(node) -> None:
        if isinstance(node, dict):
            for value in node.values():
                leaves(value)
        elif isinstance(node, list):
            for value in node:
                leaves(value)
        else:
            values.append(node)

    leaves(payload)
    best = float("inf")
    for _ in range(5):
        started = time.thread_time()
        written = json.dumps(values)
        best = min(best, time.thread_time() - started)
    return len(written.encode()) / best / 1e6


def commit() -> str:
    """The commit measured: ``BENCH_COMMIT`` where the tree is an archive of one, else HEAD."""
    if os.environ.get("BENCH_COMMIT"):
        return os.environ["BENCH_COMMIT"]
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=_pg.ROOT,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--taxonomy", choices=("onet", "esco"), default="onet")
    parser.add_argument("--batches", type=int, default=8, help=f"{BATCH}-text calls measured")
    parser.add_argument("--results", help="results file name (default by taxonomy)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    taxonomy = _pg.onet_live() if args.taxonomy == "onet" else esco_live()
    # A build trains (or compiles) on every core and leaves torch so: one thread again.
    torch.set_num_threads(1)
    titles = vacancy_titles(BATCH * (args.batches + 1))
    batches = [titles[i * BATCH : (i + 1) * BATCH] for i in range(args.batches + 1)]
    spent: collections.Counter = collections.Counter()
    for owner, name, stage in STAGES:
        timed(spent, owner, name, stage)

    normalize.rank_taxonomy_groups(taxonomy, batches[0], k=5)  # loads the engine, warms up
    engine = engines.live_engine(taxonomy)
    encoder_class = type(engine.encoder)
    timed(spent, encoder_class, "encode", ENCODE)
    timed(spent, encoder_class, "featurize", FEATURIZE)
    spent.clear()
    cpu_spent.clear()
    total, cpu_total, json_bytes, payload = 0.0, 0.0, 0, {}
    for batch in batches[1:]:
        started, cpu_started = time.perf_counter(), time.thread_time()
        answers = normalize.rank_taxonomy_groups(taxonomy, batch, k=5)
        middle, cpu_middle = time.perf_counter(), time.thread_time()
        payload = {"results": [answer.as_dict() for answer in answers]}
        json_bytes += len(json.dumps(payload).encode())
        spent[JSON_STAGE] += time.perf_counter() - middle
        cpu_spent[JSON_STAGE] += time.thread_time() - cpu_middle
        total += time.perf_counter() - started
        cpu_total += time.thread_time() - cpu_started

    per_call = {stage: seconds / args.batches * 1000 for stage, seconds in spent.items()}
    cpu_per_call = {stage: seconds / args.batches * 1000 for stage, seconds in cpu_spent.items()}
    whole = total / args.batches * 1000
    cpu_whole = cpu_total / args.batches * 1000
    outer = sum(ms for stage, ms in per_call.items() if stage not in NESTED)
    cpu_outer = sum(ms for stage, ms in cpu_per_call.items() if stage not in NESTED)
    machine = _pg.machine()
    gflops = gemm_gflops()
    json_rate = json_mb_per_s(payload)
    round_trip = machine.get("select_1_round_trip_p50_ms")
    members, dim = len(engine.index), engine.index.dim
    product_gflop = 2 * BATCH * members * dim / 1e9
    encoder_work = [encoder_gflop(engine.encoder, batch) for batch in batches[1:]]
    encode_gflop = None if None in encoder_work else float(np.mean(encoder_work))
    floors = {
        POINTER: (round_trip, "one SELECT 1 round trip"),
        ENCODE: (
            encode_gflop / gflops * 1000 if encode_gflop is not None else None,
            f"{encode_gflop:.2f} GFLOP at {gflops:.0f} GFLOP/s" if encode_gflop is not None else "",
        ),
        PRODUCT: (
            product_gflop / gflops * 1000,
            f"{BATCH} x {members:,} x {dim}: {product_gflop:.2f} GFLOP at {gflops:.0f} GFLOP/s",
        ),
        ROWS: (round_trip, "one SELECT 1 round trip"),
        JSON_STAGE: (
            json_bytes / args.batches / 1e6 / json_rate * 1000,
            f"{json_bytes / args.batches / 1e3:,.0f} kB at {json_rate:.0f} MB/s",
        ),
    }
    rows = [
        {
            "stage": stage,
            "ms": per_call.get(stage, 0.0),
            "cpu ms": cpu_per_call.get(stage, 0.0),
            "floor ms": floors.get(stage, (None, ""))[0],
            "floor": floors.get(stage, (None, ""))[1],
        }
        for stage in ORDER
    ]
    rows.append(
        {
            "stage": REST,
            "ms": whole - outer,
            "cpu ms": cpu_whole - cpu_outer,
            "floor ms": None,
            "floor": "",
        }
    )
    # The product is the search's floor; tokenising has none of its own.
    floor_sum = sum(value for value, _ in floors.values() if value is not None)
    rows.append(
        {
            "stage": WHOLE,
            "ms": whole,
            "cpu ms": cpu_whole,
            "floor ms": floor_sum,
            "floor": "the floors above",
        }
    )
    label = {
        "onet": "O*NET, the shipped model",
        "esco": "ESCO, the pretrained tower a new taxonomy serves",
    }
    served_by = getattr(engine.encoder, "runtime", "pytorch")
    print(f"\nmachine: {machine}; load average {_pg.load_average()}")
    print(f"{label[args.taxonomy]} ({engine.encoder.kind}, encoded by {served_by}), {commit()}")
    _pg.print_table(rows, ["stage", "ms", "cpu ms", "floor ms", "floor"])
    print(
        f"{BATCH * 1000 / whole:,.0f} texts/s on one core, in process "
        f"({BATCH * 1000 / cpu_whole:,.0f} a second of this thread's CPU time)"
    )
    _pg.write_results(
        args.results or ("batch_stages" if args.taxonomy == "onet" else "batch_stages_esco"),
        {
            "machine": machine,
            "commit": commit(),
            "taxonomy": label[args.taxonomy],
            "members": members,
            "encoder": {"kind": engine.encoder.kind, "runtime": served_by},
            "inputs": f"JobBERT vacancy titles (real), {args.batches} calls of {BATCH} after one",
            "threads": "1 BLAS, 1 torch",
            "ms_per_call": {row["stage"]: round(row["ms"], 1) for row in rows},
            "cpu_ms_per_call": {row["stage"]: round(row["cpu ms"], 1) for row in rows},
            "floor_ms_per_call": {
                row["stage"]: round(row["floor ms"], 2)
                for row in rows
                if row["floor ms"] is not None
            },
            "floor_basis": {row["stage"]: row["floor"] for row in rows if row["floor"]},
            "numpy_float32_gflops_one_thread": round(gflops, 1),
            "json_flat_mb_per_s": round(json_rate, 1),
            "texts_per_s_one_core": round(BATCH * 1000 / whole, 1),
            "texts_per_cpu_s": round(BATCH * 1000 / cpu_whole, 1),
            "load_average_after": _pg.load_average(),
        },
    )


if __name__ == "__main__":
    main()
