"""Exact against IVF search over the O*NET members: recall@10 and query time by nprobe.

Vectors come from the shipped model (data/models/onet) when present, else from the TF-IDF
encoder. A second, synthetic set of 250,000 random unit vectors (above the exact-search
limit) shows IVF where the product uses it. Random vectors are the hard case for IVF.

    .venv/bin/python bench/index_recall.py

Prints a table and writes bench/results/index_recall.json.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench.onet_data import onet_members  # noqa: E402
from models_app.siamese.encoders import fit_encoder, load_encoder  # noqa: E402
from models_app.siamese.index import MemberIndex, ivf_lists  # noqa: E402

SHIPPED = ROOT / "data" / "models" / "onet"


def measure(name: str, vectors: np.ndarray, queries: np.ndarray) -> list[dict]:
    ids = np.arange(len(vectors))
    started = time.perf_counter()
    exact = MemberIndex.build(vectors, ids, kind="flat")
    rows = [{"set": name, "index": "flat", "nprobe": None, "recall@10": 1.0,
             "build_s": time.perf_counter() - started}]  # fmt: skip
    truth = exact.search(queries, 10)[1]
    rows[-1]["query_ms"] = _query_ms(exact, queries)
    started = time.perf_counter()
    ivf = MemberIndex.build(vectors, ids, kind="ivf")
    build = time.perf_counter() - started
    nlist = ivf_lists(len(vectors))
    for nprobe in (1, 4, 16, 64, 128):
        ivf.set_nprobe(nprobe)
        found = ivf.search(queries, 10)[1]
        recall = float(
            np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, truth, strict=True)])
        )
        rows.append({"set": name, "index": f"ivf{nlist}", "nprobe": nprobe, "recall@10": recall,
                     "build_s": build, "query_ms": _query_ms(ivf, queries)})  # fmt: skip
    return rows


def _query_ms(index: MemberIndex, queries: np.ndarray) -> float:
    started = time.perf_counter()
    for query in queries[:200]:
        index.search(query[None, :], 10)
    return (time.perf_counter() - started) / min(200, len(queries)) * 1000


def main() -> None:
    members, _ = onet_members()
    texts = [t for _, t in members]
    encoder = load_encoder(SHIPPED) if SHIPPED.exists() else fit_encoder(texts, {})
    vectors = encoder.encode(texts)
    rng = np.random.default_rng(0)
    queries = vectors[rng.choice(len(vectors), 1000, replace=False)]
    queries = queries + rng.normal(scale=0.05, size=queries.shape).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    rows = measure(f"O*NET ({len(vectors)})", vectors, queries)
    synthetic = rng.normal(size=(250_000, vectors.shape[1])).astype(np.float32)
    synthetic /= np.linalg.norm(synthetic, axis=1, keepdims=True)
    rows += measure("synthetic (250000)", synthetic, synthetic[:1000])

    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"machine: {machine}; encoder {type(encoder).__name__}, dim {vectors.shape[1]}")
    print(f"{'set':<20}{'index':<10}{'nprobe':>7}{'recall@10':>10}{'query ms':>10}{'build s':>9}")
    for r in rows:
        nprobe = "-" if r["nprobe"] is None else r["nprobe"]
        print(f"{r['set']:<20}{r['index']:<10}{nprobe:>7}{r['recall@10']:>10.3f}"
              f"{r['query_ms']:>10.2f}{r['build_s']:>9.1f}")  # fmt: skip
    out = ROOT / "bench" / "results" / "index_recall.json"
    out.write_text(json.dumps({"machine": machine, "rows": rows}, indent=2))
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
