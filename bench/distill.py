"""A fast student distilled from the tower, measured on real inputs (JobBERT dev-unseen → ESCO).

The student (a hashed n-gram bag with the tower's 384 dimensions) learns the teacher's vectors
of ESCO's labels, two augmented copies of each (job-ad words, typos) and the curator stream's
titles as unlabelled inputs (their labels are never read; dev-unseen is never seen). Rows: the
teacher as served, the student alone and with the trigram term, each against the teacher on
the same titles (paired: difference, 95% bootstrap interval, McNemar's p), with encode speed
and one-title search latency.

    .venv/bin/python bench/distill.py --teacher var/towers/esco-h200 --minutes 20

Prints a table and writes bench/results/distill.json; the student is saved with --save.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench.jobbert_data import SHARED_DATA, esco_members, jobbert_split  # noqa: E402
from bench.real_accuracy import CachedEncoder, paired, positions, speed  # noqa: E402
from models_app.siamese.distill import (  # noqa: E402
    DistillConfig,
    distill_encoder,
    distillation_texts,
)
from models_app.siamese.encoders import load_encoder  # noqa: E402
from models_app.siamese.search import HybridMatcher, SearchConfig  # noqa: E402

STUDENT = {"kind": "ngram_bag", "buckets": 2**18, "embedding_dim": 256, "output_dim": 384}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher", type=Path, required=True, help="a tower's saved folder")
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--save", type=Path)
    parser.add_argument("--cache", type=Path, default=ROOT / "var" / "distill")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/distill.json")
    args = parser.parse_args()

    members, _, ids = esco_members(args.data)
    dev, stream = jobbert_split(args.data)
    cases = [(row.text, ids[row.code]) for row in dev]
    labels_text, labels = [t for _, t in members], [g for g, _ in members]
    config = DistillConfig(max_minutes=args.minutes)
    texts = distillation_texts(
        labels_text, [row.text for row in stream], copies=config.augmented_copies, seed=0
    )
    teacher = load_encoder(args.teacher)
    key = hashlib.sha256(("\n".join(texts) + str(args.teacher.resolve())).encode()).hexdigest()
    cached = args.cache / f"teacher-{key[:16]}.npy"
    if cached.exists():
        vectors = np.load(cached)
    else:
        print(f"encoding {len(texts)} texts with the teacher", flush=True)
        vectors = teacher.encode(texts)
        args.cache.mkdir(parents=True, exist_ok=True)
        np.save(cached, vectors)
    result = distill_encoder(texts, teacher, STUDENT, config, teacher_vectors=vectors)
    print(f"student: {result.steps} steps, {result.seconds:.0f} s, {result.metrics}", flush=True)
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
        result.encoder.save(args.save)

    rows, hits_of = [], {}
    titles = [text for text, _ in cases]
    for name, encoder, search in (
        ("teacher: tower trained on ESCO, as served", teacher, SearchConfig(lexical_weight=0.0)),
        ("student alone", result.encoder, SearchConfig(lexical_weight=0.0)),
        ("student + trigram term (0.3, window 0.03)", result.encoder, SearchConfig()),
    ):
        cached_encoder = CachedEncoder(encoder)
        matcher = HybridMatcher(cached_encoder, labels_text, labels, config=search)
        found = positions(matcher, cases)
        hits = np.array([p == 1 for p in found])
        hits_of[name] = hits
        n = len(found)
        rows.append({
            "name": name,
            "acc@1": float(hits.mean()),
            "r@5": sum(p is not None and p <= 5 for p in found) / n,
            "mrr": sum(1 / p for p in found if p is not None) / n,
            **speed(matcher, encoder, titles[:2000]),
        })  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    teacher_name = rows[0]["name"]
    for row in rows[1:]:
        row["against_teacher"] = paired(hits_of[row["name"]], hits_of[teacher_name])
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "machine": machine, "student": STUDENT, "distill": dataclasses.asdict(config),
        "texts": len(texts), "steps": result.steps, "seconds": round(result.seconds, 1),
        "teacher_cosine": result.metrics["teacher_cosine"], "rows": rows,
    }, indent=2))  # fmt: skip
    print(f"\nJobBERT dev-unseen -> ESCO, {len(cases)} titles; machine: {machine}")
    for r in rows:
        against = r.get("against_teacher")
        versus = f"{against['difference']:+.3f} {against['ci95']}" if against else "reference"
        print(f"{r['name'][:44]:45}{r['acc@1']:7.3f}{r['r@5']:7.3f}{r['mrr']:7.3f}  {versus:24}"
              f"{r['encode_per_second']:>9}{r['search_p50_ms']:>8}")  # fmt: skip


if __name__ == "__main__":
    main()
