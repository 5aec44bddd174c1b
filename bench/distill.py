"""A fast student distilled from the tower, measured on JobBERT (ESCO) or O*NET's four tests.

The student (a hashed n-gram bag with its teacher's dimensions, ``STUDENT_SPEC``) learns the
teacher's vectors of the taxonomy's strings, two augmented copies of each (job-ad words, typos)
and inputs as unlabelled texts: for ESCO the curator stream's titles (their labels are never
read; dev-unseen is never seen), for O*NET the simulated curator inputs (never the Annotations
test's). Rows: the teacher, the student alone and with the trigram term, and on O*NET the
product as served there; each against the reference row on the same cases (paired: difference,
95% bootstrap interval, McNemar's p), with encode speed and one-text search latency.

    .venv/bin/python bench/distill.py --teacher var/towers/esco-h200 --minutes 15
    .venv/bin/python bench/distill.py --taxonomy onet --teacher var/towers/onet-h100

Prints a table and writes bench/results/distill.json (distill_onet.json for O*NET); the student
is saved with --save.
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
from bench.onet_data import onet_members, simulated_feedback  # noqa: E402
from bench.real_accuracy import CachedEncoder, paired, positions, speed  # noqa: E402
from models_app.siamese.distill import (  # noqa: E402
    DistillConfig,
    distill_encoder,
    distillation_texts,
)
from models_app.siamese.encoders import load_encoder  # noqa: E402
from models_app.siamese.evaluation import build_test_suite  # noqa: E402
from models_app.siamese.hybrid_matcher import HybridMatcher  # noqa: E402
from models_app.siamese.search import SearchConfig  # noqa: E402
from models_app.siamese.specs import STUDENT_SPEC  # noqa: E402

STUDENT = STUDENT_SPEC["encoder"]
SHIPPED_ONET = ROOT / "data" / "models" / "onet"


def taxonomy_data(taxonomy: str, data: Path):
    """(members as (group, text), unlabelled inputs, test sets by name as (text, group))."""
    if taxonomy == "esco":
        members, _, ids = esco_members(data)
        dev, stream = jobbert_split(data)
        return (
            members,
            [r.text for r in stream],
            {"dev_unseen": [(r.text, ids[r.code]) for r in dev]},
        )
    members, _ = onet_members()
    feedback, annotations = simulated_feedback(members)
    suite = build_test_suite(members, seed=0, size=1000, verdicts=annotations)
    return members, [example.text for example in feedback], suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--taxonomy", choices=("esco", "onet"), default="esco")
    parser.add_argument("--teacher", type=Path, required=True, help="a tower's saved folder")
    parser.add_argument("--minutes", type=float, default=15.0)
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--save", type=Path)
    parser.add_argument("--cache", type=Path, default=ROOT / "var" / "distill")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    suffix = "" if args.taxonomy == "esco" else f"_{args.taxonomy}"
    out = args.out or ROOT / f"bench/results/distill{suffix}.json"

    members, inputs, test_sets = taxonomy_data(args.taxonomy, args.data)
    labels_text, labels = [t for _, t in members], [g for g, _ in members]
    config = DistillConfig(max_minutes=args.minutes)
    texts = distillation_texts(labels_text, inputs, copies=config.augmented_copies, seed=0)
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

    embedding_alone, trigram_term = SearchConfig(lexical_weight=0.0), SearchConfig()
    matchers = [
        (f"teacher: tower trained on {args.taxonomy}, embedding alone", teacher, embedding_alone),
        ("student alone", result.encoder, embedding_alone),
        ("student + trigram term (0.3, window 0.03)", result.encoder, trigram_term),
    ]
    if args.taxonomy == "onet":
        shipped = load_encoder(SHIPPED_ONET)
        matchers.append(("product as served: shipped model + trigram term", shipped, trigram_term))
    # The reference: the teacher on ESCO; on O*NET the product, which a student would replace.
    reference = matchers[-1][0] if args.taxonomy == "onet" else matchers[0][0]
    cases = [case for name in test_sets for case in test_sets[name]]
    queries = [text for text, _ in cases]
    rows, hits_of = [], {}
    for name, encoder, search in matchers:
        matcher = HybridMatcher(CachedEncoder(encoder), labels_text, labels, config=search)
        found = positions(matcher, cases)
        hits_of[name] = np.array([p == 1 for p in found])
        row, start = {"name": name}, 0
        for set_name, set_cases in test_sets.items():
            part = found[start : start + len(set_cases)]
            start += len(set_cases)
            n = len(part)
            row[set_name] = {
                "acc@1": sum(p == 1 for p in part) / n,
                "r@5": sum(p is not None and p <= 5 for p in part) / n,
                "mrr": sum(1 / p for p in part if p is not None) / n,
            }
        rows.append({**row, **speed(matcher, encoder, queries[:2000])})
        print(json.dumps(rows[-1]), flush=True)
    for row in rows:
        if row["name"] != reference:
            row["against_reference"] = paired(hits_of[row["name"]], hits_of[reference])
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "machine": machine, "taxonomy": args.taxonomy, "teacher": str(args.teacher),
        "student": {**STUDENT, "output_dim": result.encoder.dim},
        "distill": dataclasses.asdict(config), "texts": len(texts),
        "steps": result.steps, "seconds": round(result.seconds, 1),
        "teacher_cosine": result.metrics["teacher_cosine"], "reference": reference,
        "sets": {name: len(set_cases) for name, set_cases in test_sets.items()}, "rows": rows,
    }, indent=2))  # fmt: skip
    print(f"\n{args.taxonomy}: {len(cases)} cases; reference: {reference}; machine: {machine}")
    print(f"{'matcher':45}" + "".join(f"{name[:11]:>12}" for name in test_sets)
          + f"  {'acc@1 vs reference':26}{'encode/s':>9}{'p50 ms':>8}")  # fmt: skip
    for r in rows:
        against = r.get("against_reference")
        versus = f"{against['difference']:+.3f} {against['ci95']}" if against else "reference"
        print(f"{r['name'][:44]:45}" + "".join(f"{r[name]['acc@1']:12.3f}" for name in test_sets)
              + f"  {versus:26}{r['encode_per_second']:>9}{r['search_p50_ms']:>8}")  # fmt: skip
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
