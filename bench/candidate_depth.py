"""How many candidates the ranker gets, against what it answers: the title tower served on
ESCO's dev-unseen JobBERT titles before any verdict (the starter ranker), with each matcher
proposing its best 15 groups from 100 member hits (the product's setting) and more.

Candidate recall (the right group among the candidates) is the ranker's ceiling; acc@1 is
what a user sees. Each setting is paired against the product's on the same titles (95%
bootstrap interval, McNemar's p), with the candidates a text gets on average.

    .venv/bin/python bench/candidate_depth.py

Prints a table and writes bench/results/candidate_depth.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import bench.ranker as served_bench  # noqa: E402
from bench.jobbert_data import SHARED_DATA  # noqa: E402
from bench.real_accuracy import paired  # noqa: E402
from bench.starter_ranker import answers  # noqa: E402
from models_app.siamese.ranker.files import STARTER_FILE  # noqa: E402
from models_app.siamese.ranker.model import PRIOR_DESCRIPTION_WEIGHT, LinearRanker  # noqa: E402
from models_app.siamese.search import SearchConfig  # noqa: E402

OUT = ROOT / "bench" / "results" / "candidate_depth.json"
# (member hits a text, groups each matcher proposes); the first is the product's.
SETTINGS = [(100, 15), (100, 25), (200, 30), (200, 50)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    taxonomy = served_bench.esco_taxonomy(args.data)
    encoder = served_bench.title_tower_encoder()
    starter = LinearRanker.from_dict(json.loads(STARTER_FILE.read_text()))
    product = served_bench.Served(
        taxonomy, encoder, SearchConfig(lexical_weight=0.0), PRIOR_DESCRIPTION_WEIGHT
    )
    texts = [t for t, _ in taxonomy.dev]
    labels = np.array([g for _, g in taxonomy.dev])
    vectors = encoder.vectors(texts)
    rows, base = [], None
    print("hits  per matcher  candidates  recall  acc@1  acc@1 against the product [95%]")
    for depth, per_matcher in SETTINGS:
        served_bench.DEPTH = depth
        candidates = product.candidates(texts, vectors, per_matcher=per_matcher)
        right = answers(starter, candidates, labels)["top_right"]
        recall = np.array(
            [bool(np.any(c.groups == g)) for c, g in zip(candidates, labels, strict=True)]
        )
        base = base or (right, recall)
        row = {
            "member_hits": depth,
            "per_matcher": per_matcher,
            "candidates_mean": round(float(np.mean([len(c) for c in candidates])), 1),
            "candidate_recall": round(float(recall.mean()), 4),
            "acc@1": round(float(right.mean()), 4),
            "acc@1_against_product": paired(right, base[0]),
            "recall_against_product": paired(recall, base[1]),
        }
        rows.append(row)
        low, high = row["acc@1_against_product"]["ci95"]
        print(
            f"{depth:4} {per_matcher:12} {row['candidates_mean']:11} {row['candidate_recall']:7.3f}"
            f" {row['acc@1']:6.3f}  {row['acc@1_against_product']['difference']:+.4f} "
            f"[{low:+.4f}, {high:+.4f}]",
            flush=True,
        )
    report = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "titles": len(texts),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
