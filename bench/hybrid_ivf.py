"""The product's hybrid search (embedding + trigram term) over an IVF index against the same
search over an exact one: recall@10 and one query's time, on a taxonomy past the exact limit.

Members: O*NET's alternate titles and ``--copies`` variants of each (a seniority or schedule
word and a number appended: distinct strings that cluster like real titles), encoded by the
shipped model. Queries: JobBERT vacancy titles (``../shared/data``). The IVF index has the
product's number of lists for its size (``ivf_lists``) and is searched at several ``nprobe``;
recall@10 is the share of the exact search's 10 best members the IVF search also returns.

    .venv/bin/python bench/hybrid_ivf.py [--copies 3] [--queries 200]
    .venv/bin/python bench/hybrid_ivf.py --copies 18   # 1,000,000 members

Times are one query's encode and search, p50; the IVF's build includes its training.

Prints a table and writes bench/results/hybrid_ivf_<thousands of members>k.json. Engine only:
no database.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from models_app.siamese.encoders import load_encoder  # noqa: E402
from models_app.siamese.index import MemberIndex, ivf_lists  # noqa: E402
from models_app.siamese.search import MemberSearch, SearchConfig  # noqa: E402

SHARED_DATA = ROOT.parent / "shared" / "data"
WORDS = ["senior", "junior", "lead", "remote", "night", "part time", "ii", "iii", "assistant",
         "trainee", "chief", "principal", "associate", "weekend", "contract"]  # fmt: skip
DEPTH = 40  # what normalize asks for at k=5 (SIAMWEB_MEMBERS_PER_GROUP 8)


def members(copies: int, rng: random.Random) -> list[str]:
    with (SHARED_DATA / "onet" / "Alternate Titles.txt").open(encoding="utf-8") as handle:
        titles = [row["Alternate Title"] for row in csv.DictReader(handle, delimiter="\t")]
    variants = [f"{title} {rng.choice(WORDS)} {i % 997}" for i, title in enumerate(titles * copies)]
    return titles + variants


def one_at_a_time(search: MemberSearch, encoder, queries: list[str]) -> tuple:
    """Each query encoded and searched alone, as normalize does for one text; (hits, ms)."""
    hits, ms = [], []
    for query in queries:
        started = time.perf_counter()
        hits.append(search.search([query], encoder.encode([query]), DEPTH)[0])
        ms.append((time.perf_counter() - started) * 1000)
    return hits, ms


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    rng = random.Random(20261126)
    texts = members(args.copies, rng)
    encoder = load_encoder(ROOT / "data" / "models" / "onet")
    started = time.perf_counter()
    vectors = encoder.encode(texts)
    encode_s = time.perf_counter() - started
    ids = np.arange(1, len(texts) + 1, dtype=np.int64)
    with (SHARED_DATA / "jobbert" / "validation_titles.csv").open(encoding="utf-8") as handle:
        vacancies = [row["vacancyTitle"] for row in csv.DictReader(handle)]
    queries = rng.sample(vacancies, args.queries)
    config = SearchConfig()  # the shipped model's: lexical weight 0.3, window 0.03

    exact = MemberSearch(MemberIndex.build(vectors, ids, kind="flat"), texts, config)
    truth, exact_ms = one_at_a_time(exact, encoder, queries)
    rows = [{"index": "exact (flat)", "nprobe": None, "recall@10": 1.0,
             "p50_ms": statistics.median(exact_ms), "p99_ms": float(np.percentile(exact_ms, 99)),
             "build_s": None}]  # fmt: skip
    nlist = ivf_lists(len(texts))
    started = time.perf_counter()
    ivf_index = MemberIndex.build(vectors, ids, kind="ivf", nlist=nlist)
    build_s = time.perf_counter() - started
    ivf = MemberSearch(ivf_index, texts, config)
    for nprobe in sorted({8, 32, nlist // 16, 128}):
        ivf_index.set_nprobe(nprobe)
        found, ms = one_at_a_time(ivf, encoder, queries)
        recall = statistics.mean(
            len({m for m, _ in a[:10]} & {m for m, _ in b[:10]}) / 10
            for a, b in zip(truth, found, strict=True)
        )
        rows.append({"index": f"IVF, {nlist:,} lists", "nprobe": nprobe, "recall@10": recall,
                     "p50_ms": statistics.median(ms), "p99_ms": float(np.percentile(ms, 99)),
                     "build_s": build_s})  # fmt: skip

    machine = (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )
    print(f"machine: {machine}; {len(texts):,} members encoded in {encode_s:.0f} s")
    print(f"{'index':<22}{'nprobe':>8}{'recall@10':>11}{'p50 ms':>9}{'p99 ms':>9}")
    for row in rows:
        print(f"{row['index']:<22}{row['nprobe'] or '-':>8}{row['recall@10']:>11.3f}"
              f"{row['p50_ms']:>9.1f}{row['p99_ms']:>9.1f}")  # fmt: skip
    out = ROOT / "bench" / "results" / f"hybrid_ivf_{len(texts) // 1000}k.json"
    out.write_text(json.dumps({"machine": machine, "members": len(texts),
                               "queries": len(queries), "rows": rows}, indent=2))  # fmt: skip
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
