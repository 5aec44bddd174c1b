"""Quora paraphrase retrieval (Bonadiman et al.): SDML against triplet loss with random and hard
negatives, on a subset that fits a CPU budget.

Clusters are the transitive closure of the duplicate pairs; clusters are split 80/20 into train
and test. The index holds every question of the subset; each test query is one question of a
test cluster with at least two questions, and a hit is another question of its cluster (P@1,
P@10 as "at least one paraphrase in the first N", MRR). The encoder is the paper's hashed-word
CNN (``conv_words``), trained for the same time budget with each loss.

    .venv/bin/python bench/quora.py [--path ../shared/data/quora/quora_duplicate_questions.tsv.gz]
        [--questions 30000] [--queries 2000] [--minutes 4]

The Quora data may not be redistributed, so it is read from the shared folder, never copied.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import platform
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from models_app.siamese.index import MemberIndex  # noqa: E402
from models_app.siamese.sampling import prepare_data  # noqa: E402
from models_app.siamese.specs import TrainConfig  # noqa: E402
from models_app.siamese.train import train_encoder  # noqa: E402

DEFAULT_PATH = ROOT.parent / "shared" / "data" / "quora" / "quora_duplicate_questions.tsv.gz"
ENCODER = {"kind": "conv_words", "min_count": 2}
LOSSES = {
    "SDML (ε = 0.3)": {"loss": "sdml"},
    "triplet, random negatives": {
        "loss": "triplet",
        "loss_params": {"margin": 0.5, "mining": "random"},
    },
    "triplet, hard negatives": {
        "loss": "triplet",
        "loss_params": {"margin": 0.5, "mining": "hard"},
    },
}


def clusters(path: Path) -> list[list[str]]:
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    text: dict[str, str] = {}
    csv.field_size_limit(10**7)
    with gzip.open(path, "rt", encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            for qid, question in ((row["qid1"], row["question1"]), (row["qid2"], row["question2"])):
                if question and question.strip():
                    text[qid] = question.strip()
                    find(qid)
            if row["is_duplicate"] == "1" and row["question1"] and row["question2"]:
                parent[find(row["qid1"])] = find(row["qid2"])
    members: dict[str, list[str]] = defaultdict(list)
    for qid, question in text.items():
        members[find(qid)].append(question)
    return list(members.values())


def evaluate(encoder, questions, labels, queries) -> dict[str, float]:
    vectors = encoder.encode(questions)
    index = MemberIndex.build(vectors, np.arange(len(questions)))
    _, ids = index.search(vectors[queries], 51)
    p1 = p10 = rr = 0.0
    for query, row in zip(queries, ids, strict=True):
        ranked = [i for i in row if i >= 0 and i != query][:50]
        hits = [rank for rank, i in enumerate(ranked) if labels[i] == labels[query]]
        if hits:
            p1 += hits[0] == 0
            p10 += hits[0] < 10
            rr += 1.0 / (hits[0] + 1)
    n = len(queries)
    return {"p@1": p1 / n, "p@10": p10 / n, "mrr": rr / n}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--path", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--questions", type=int, default=30_000)
    parser.add_argument("--queries", type=int, default=2_000)
    parser.add_argument("--minutes", type=float, default=4.0)
    args = parser.parse_args()
    if not args.path.exists():
        sys.exit(f"no Quora file at {args.path}")

    rng = random.Random(0)
    all_clusters = clusters(args.path)
    rng.shuffle(all_clusters)
    cut = int(len(all_clusters) * 0.8)
    train_clusters, test_clusters = all_clusters[:cut], all_clusters[cut:]
    # A subset: multi-question clusters first (they carry the paraphrase signal), then singletons.
    test_multi = [c for c in test_clusters if len(c) >= 2][: args.queries]
    train_members = [(i, q) for i, c in enumerate(train_clusters) if len(c) >= 2 for q in c][
        : int(args.questions * 0.7)
    ]
    questions = [q for c in test_multi for q in c]
    labels = [i for i, c in enumerate(test_multi) for _ in c]
    offset = len(test_multi)
    for j, c in enumerate(train_clusters):
        if len(questions) >= args.questions:
            break
        questions.extend(c)
        labels.extend([offset + j] * len(c))
    queries, seen = [], set()
    for position, label in enumerate(labels[: sum(len(c) for c in test_multi)]):
        if label not in seen:
            seen.add(label)
            queries.append(position)
    print(
        f"{len(all_clusters)} clusters; index {len(questions)} questions; "
        f"{len(queries)} test queries; training on {len(train_members)} questions",
        flush=True,
    )

    results = []
    for name, loss in LOSSES.items():
        config = TrainConfig(
            **loss, batch_size=256, max_minutes=args.minutes, max_steps=100_000,
            eval_every=500, patience=4, typo_share=0.0, synonym_share=0.0,
            extra_words_share=0.0, hard_negative_share=0.0, validation_max=1000,
        )  # fmt: skip
        data = prepare_data(train_members, config=config)
        started = time.perf_counter()
        result = train_encoder(data, ENCODER, config)
        metrics = evaluate(result.encoder, questions, labels, queries)
        results.append({"loss": name, **metrics, "steps": result.steps,
                        "seconds": round(time.perf_counter() - started, 1)})  # fmt: skip
        print(json.dumps(results[-1]), flush=True)

    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"\nmachine: {machine}")
    print(f"{'loss':<30}{'P@1':>7}{'P@10':>7}{'MRR':>7}{'steps':>8}")
    for r in results:
        print(f"{r['loss']:<30}{r['p@1']:>7.3f}{r['p@10']:>7.3f}{r['mrr']:>7.3f}{r['steps']:>8}")
    out = ROOT / "bench" / "results" / "quora.json"
    settings = {key: str(value) for key, value in vars(args).items()}
    out.write_text(json.dumps({"machine": machine, "args": settings, "results": results}, indent=2))
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
