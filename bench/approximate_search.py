"""Approximate search where it is safe: the served answers over an IVF index against exact
search, on real vacancy titles, before any verdict.

For O*NET (the shipped student, 53,767 members) and ESCO (the title tower, as a new taxonomy
gets it), 5,000 dev-unseen JobBERT titles are answered as the product serves them (its
candidates, features and the starter ranker) over an exact index and over IVF at several
``nprobe``. Per setting: the share of titles whose served top 5 (groups, in order) is identical
to exact search's, acc@1 paired against exact (95% bootstrap interval, McNemar's p), and the
search's own time for the titles in batches of 500 (``MemberSearch.search``, one core busy or
not: read the times as a ratio to exact's on the same run).

    .venv/bin/python bench/approximate_search.py [--titles 5000] [--taxonomies onet,esco]

Prints a table and writes bench/results/approximate_search.json.
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

import numpy as np  # noqa: E402

from bench.jobbert_data import SHARED_DATA  # noqa: E402
from bench.ranker import (  # noqa: E402
    Served,
    esco_taxonomy,
    onet_taxonomy,
    shipped_onet,
    title_tower_encoder,
)
from bench.real_accuracy import paired  # noqa: E402
from models_app.siamese.index import MemberIndex, ivf_lists  # noqa: E402
from models_app.siamese.ranker.files import STARTER_FILE  # noqa: E402
from models_app.siamese.ranker.model import PRIOR_DESCRIPTION_WEIGHT, LinearRanker  # noqa: E402
from models_app.siamese.search import MemberSearch, SearchConfig  # noqa: E402

OUT = ROOT / "bench" / "results" / "approximate_search.json"
NPROBES = (8, 16, 32, 64)
BATCH = 500
DEPTH = 120  # what Served asks the search for (its depth and slack)


def top5(candidates, ranker: LinearRanker) -> list[tuple[int, ...]]:
    found = []
    for c in candidates:
        if not len(c):
            found.append(())
            continue
        order = np.argsort(-ranker.scores(c.features), kind="stable")[:5]
        found.append(tuple(int(g) for g in c.groups[order]))
    return found


def search_seconds(search: MemberSearch, texts: list[str], vectors: np.ndarray) -> float:
    started = time.perf_counter()
    for start in range(0, len(texts), BATCH):
        search.search(texts[start : start + BATCH], vectors[start : start + BATCH], DEPTH)
    return time.perf_counter() - started


def run(name: str, served: Served, texts, labels, starter: LinearRanker) -> dict:
    vectors = served.encoder.vectors(texts)
    exact_search = served.search
    exact = top5(served.candidates(texts, vectors), starter)
    exact_right = np.array([bool(t) and t[0] == g for t, g in zip(exact, labels, strict=True)])
    exact_seconds = search_seconds(exact_search, texts, vectors)
    members = len(served.member_vectors)
    nlist = ivf_lists(members)
    started = time.perf_counter()
    index = MemberIndex.build(served.member_vectors, np.arange(members), kind="ivf")
    build = time.perf_counter() - started
    member_texts = [t for _, t in served.taxonomy.members]
    rows = [{"index": "exact", "nprobe": None, "search_s": round(exact_seconds, 3),
             "acc@1": round(float(exact_right.mean()), 4), "top5_identical": 1.0}]  # fmt: skip
    print(f"{name:5} exact       acc@1 {exact_right.mean():.4f}  search {exact_seconds:6.2f} s")
    for nprobe in NPROBES:
        index.set_nprobe(nprobe)
        served.search = MemberSearch(index, member_texts, exact_search.config)
        found = top5(served.candidates(texts, vectors), starter)
        right = np.array([bool(t) and t[0] == g for t, g in zip(found, labels, strict=True)])
        seconds = search_seconds(served.search, texts, vectors)
        identical = float(np.mean([a == b for a, b in zip(found, exact, strict=True)]))
        row = {
            "index": f"ivf{nlist}",
            "nprobe": nprobe,
            "search_s": round(seconds, 3),
            "acc@1": round(float(right.mean()), 4),
            "top5_identical": round(identical, 4),
            "top1_identical": round(
                float(np.mean([a[:1] == b[:1] for a, b in zip(found, exact, strict=True)])), 4
            ),
            "against_exact": paired(right, exact_right),
        }
        rows.append(row)
        low, high = row["against_exact"]["ci95"]
        print(
            f"{name:5} ivf nprobe {nprobe:3}  acc@1 {row['acc@1']:.4f} "
            f"({row['against_exact']['difference']:+.4f} [{low:+.4f}, {high:+.4f}])  "
            f"top 5 identical {identical:.4f}  search {seconds:6.2f} s",
            flush=True,
        )
    served.search = exact_search
    # The exact index's first pass (exact_cosines.ExactCosines): it serves a search of a few
    # texts, so each title is searched alone, as a one-text request is.
    served.texts_a_search = 1
    found = top5(served.candidates(texts, vectors), starter)
    served.texts_a_search = 512
    right = np.array([bool(t) and t[0] == g for t, g in zip(found, labels, strict=True)])
    started = time.perf_counter()
    for i in range(min(len(texts), 1000)):
        exact_search.search(texts[i : i + 1], vectors[i : i + 1], DEPTH)
    alone = (time.perf_counter() - started) / min(len(texts), 1000) * 1000
    identical = float(np.mean([a == b for a, b in zip(found, exact, strict=True)]))
    first_pass = exact_search.exact.has_first_pass
    rows.append({
        "index": "exact, one text a search" + (" (first pass)" if first_pass else ""),
        "nprobe": None,
        "search_ms_one_text": round(alone, 3),
        "acc@1": round(float(right.mean()), 4),
        "top5_identical": round(identical, 4),
        "against_exact": paired(right, exact_right),
    })  # fmt: skip
    print(f"{name:5} one text a search (first pass: {first_pass})  acc@1 {right.mean():.4f}  "
          f"top 5 identical {identical:.4f}  search {alone:.2f} ms a text", flush=True)  # fmt: skip
    return {"members": members, "ivf_lists": nlist, "ivf_build_s": round(build, 1),
            "titles": len(texts), "rows": rows}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--titles", type=int, default=5000)
    parser.add_argument("--taxonomies", default="onet,esco")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    starter = LinearRanker.from_dict(json.loads(STARTER_FILE.read_text()))
    report: dict = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "taxonomies": {},
    }
    for name in args.taxonomies.split(","):
        if name == "onet":
            taxonomy = onet_taxonomy(args.data)
            encoder, search = shipped_onet()
        else:
            taxonomy = esco_taxonomy(args.data)
            encoder, search = title_tower_encoder(), SearchConfig(lexical_weight=0.0)
        served = Served(taxonomy, encoder, search, PRIOR_DESCRIPTION_WEIGHT)
        titles = taxonomy.dev[: args.titles]
        texts = [t for t, _ in titles]
        labels = [g for _, g in titles]
        report["taxonomies"][name] = run(name, served, texts, labels, starter)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
