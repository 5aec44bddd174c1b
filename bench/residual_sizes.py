"""How large the starter's residual network may be: each size against the starter without one,
on vacancy titles and on clean titles.

Fits the starter as ``bench/starter_ranker.py`` does (``fit_starter``), once without a network
and once per size below, and measures before any
verdict, paired against the starter without a network on the same titles (95% bootstrap):
- acc@1 on dev-unseen JobBERT titles, ESCO (the title tower) and O*NET (the shipped student);
- acc@1 on 2,000 clean O*NET alternate titles held out of the taxonomy (``bench/vouching.py``'s
  set): a gain on vacancy titles must not be paid for there;
- the share of each set coded at a 90% target from the starter's evidence, and its precision.

    .venv/bin/python bench/residual_sizes.py

Prints a table and writes bench/results/residual_sizes.json.
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

from bench.jobbert_data import SHARED_DATA, consistently_labelled  # noqa: E402
from bench.ranker import esco_taxonomy, onet_taxonomy  # noqa: E402
from bench.real_accuracy import paired  # noqa: E402
from bench.starter_ranker import (  # noqa: E402
    TAXONOMIES,
    candidate_sets,
    consistent_examples,
    fit_starter,
)
from bench.vouching import clean_set, top_answers  # noqa: E402
from models_app.siamese.ranker.residual import ResidualConfig  # noqa: E402
from models_app.siamese.vouching import vouching_threshold  # noqa: E402

OUT = ROOT / "bench" / "results" / "residual_sizes.json"
SIZES = {
    "4 x 64 units, 30 epochs": ResidualConfig(hidden=64, networks=4, epochs=30),
    "4 x 64 units, 30 epochs, weight decay 1e-2": ResidualConfig(
        hidden=64, networks=4, epochs=30, weight_decay=1e-2
    ),
    "8 x 32 units, 10 epochs (ships)": ResidualConfig(),
    "8 x 32 units, 10 epochs, seeds from 100": ResidualConfig(seed=100),
    "4 x 16 units, 10 epochs": ResidualConfig(hidden=16, networks=4, epochs=10),
}


def measured(ranker, sets, consistent, clean, consistent_dev) -> dict:
    cold = [e for name in TAXONOMIES for e in consistent[name][0]]
    right, p, _ = top_answers(ranker, [e.candidates for e in cold], [e.group_id for e in cold])
    threshold = vouching_threshold(p, right, target=0.9).threshold
    found = {}
    for name in TAXONOMIES:
        right, p, _ = top_answers(ranker, sets[name]["dev_cold"], sets[name]["dev_labels"])
        rows = consistent_dev[name]
        found[name] = (right, right[rows], p[rows])
    right, p, _ = top_answers(ranker, clean["candidates"], clean["labels"])
    found["clean"] = (right, right, p)
    row = {"threshold_90": threshold}
    for name, (every, right, p) in found.items():
        coded = p >= threshold if threshold is not None else np.zeros(len(p), bool)
        row[name] = {
            "acc@1": round(float(every.mean()), 4),
            "coded_at_90": round(float(coded.mean()), 4),
            "precision": round(float(right[coded].mean()), 4) if coded.any() else None,
        }
    return row, {name: every for name, (every, _, _) in found.items()}


def main() -> None:
    sets = {name: candidate_sets(name, SHARED_DATA, [500, 2000]) for name in TAXONOMIES}
    consistent = {name: consistent_examples(name, SHARED_DATA, sets[name]) for name in TAXONOMIES}
    clean = clean_set(SHARED_DATA)
    consistent_dev = {}
    for name in TAXONOMIES:
        taxonomy = esco_taxonomy(SHARED_DATA) if name == "esco" else onet_taxonomy(SHARED_DATA)
        texts = [text for text, _ in taxonomy.dev]
        consistent_dev[name] = consistently_labelled(texts, sets[name]["dev_labels"])
    both = ("esco", "onet")
    base_row, base_hits = measured(
        fit_starter(sets, consistent, both, residual=False), sets, consistent, clean,
        consistent_dev,
    )  # fmt: skip
    rows = {"no residual network (before)": base_row}
    for label, config in SIZES.items():
        started = time.perf_counter()
        ranker = fit_starter(sets, consistent, both, size=config)
        seconds = round(time.perf_counter() - started, 1)
        row, hits = measured(ranker, sets, consistent, clean, consistent_dev)
        for name in hits:
            row[name]["against_none"] = paired(hits[name], base_hits[name])
        rows[label] = {**row, "fit_seconds": seconds}
        print(f"  {label}: {seconds} s", flush=True)

    print(f"\n{'before any verdict':45}{'ESCO':>22}{'O*NET':>22}{'clean O*NET':>22}")
    for label, row in rows.items():
        cells = []
        for name in (*TAXONOMIES, "clean"):
            versus = row[name].get("against_none")
            diff = f"{versus['difference']:+.3f}" if versus else "   ref"
            cells.append(f"{row[name]['acc@1']:.3f} {diff} {row[name]['coded_at_90']:6.1%}")
        print(f"{label[:44]:45}" + "".join(f"{c:>22}" for c in cells))
    print("(acc@1, against no network, share coded at a 90% target; intervals in the JSON)")
    report = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "sizes": rows,
    }
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
