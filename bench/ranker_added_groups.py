"""A verdict for a group no matcher proposed, as a fit example or not: the taxonomy's own
ranker fitted on the real stream's first verdicts both ways, paired on titles nobody judged.

The product counts such a verdict towards the first fit, and it teaches through the verdict
history and the curators' members, but the weights learn only from verdicts whose group was
among the candidates ("proposed only"). The alternative measured here adds each verdict's group
to its text's candidates where no matcher proposed it (``candidates_of_texts``' ``required``),
with the features a group outside the hits has ("added to fit"). Both fits start from the
starter ranker (the product's prior), on the JobBERT stream judged in arrival order with its
labels as the verdicts, and are served on the dev-unseen titles with the same curators' members
and history. Per verdict count: acc@1 of each, the difference paired with a 95% bootstrap
interval and McNemar's p, how many verdicts had their group added, and the probability's ECE,
share at p >= 0.9 and precision there.

    .venv/bin/python bench/ranker_added_groups.py [--taxonomies esco,onet] [--verdicts 100,500,2000]

Prints a table and writes bench/results/ranker_added_groups.json.
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

from bench.jobbert_data import SHARED_DATA  # noqa: E402
from bench.ranker import (  # noqa: E402
    Served,
    esco_taxonomy,
    onet_taxonomy,
    shipped_onet,
    title_tower_encoder,
    verdicts_so_far,
)
from bench.real_accuracy import paired  # noqa: E402
from models_app.siamese.calibration import expected_calibration_error  # noqa: E402
from models_app.siamese.ranker.files import STARTER_FILE  # noqa: E402
from models_app.siamese.ranker.model import (  # noqa: E402
    PRIOR_DESCRIPTION_WEIGHT,
    LinearRanker,
    RankingExample,
    fit_ranker,
)
from models_app.siamese.search import SearchConfig  # noqa: E402

OUT = ROOT / "bench" / "results" / "ranker_added_groups.json"


def served_answers(ranker: LinearRanker, candidates, labels) -> dict:
    """Per text: whether the top answer is right, and its probability."""
    right, probability = [], []
    for c, label in zip(candidates, labels, strict=True):
        if not len(c):
            right.append(False)
            probability.append(0.0)
            continue
        scores = ranker.scores(c.features)
        top = int(np.argmax(scores))
        right.append(bool(c.groups[top] == label))
        probability.append(float(ranker.probabilities(scores, c.similarity.max())[top]))
    return {"right": np.array(right), "probability": np.array(probability)}


def calibration(found: dict) -> dict:
    p, r = found["probability"], found["right"]
    sure = p >= 0.9
    return {
        "acc@1": round(float(r.mean()), 4),
        "ece": round(expected_calibration_error(p, r), 4),
        "share_p_0.9": round(float(sure.mean()), 4),
        "right_at_p_0.9": round(float(r[sure].mean()), 4) if sure.any() else None,
    }


def run(name: str, taxonomy, served: Served, starter: LinearRanker, counts: list[int]) -> dict:
    dev_texts = [t for t, _ in taxonomy.dev]
    dev_labels = np.array([g for _, g in taxonomy.dev])
    texts = [t for t, _ in taxonomy.stream]
    labels = np.array([g for _, g in taxonomy.stream])
    vectors = served.encoder.vectors(texts)
    dev_vectors = served.encoder.vectors(dev_texts)
    cold = served.candidates(texts, vectors)
    cold_top = np.array(
        [int(c.groups[np.argmax(starter.scores(c.features))]) if len(c) else -1 for c in cold]
    )
    rows = []
    for count in counts:
        count = min(count, len(texts))
        judged, history, own = verdicts_so_far(
            texts[:count], labels[:count], vectors[:count], cold_top[:count], len(taxonomy.codes)
        )
        examples = served.examples(texts[:count], vectors[:count], labels[:count], judged,
                                   history, own)  # fmt: skip
        proposed_only = [
            RankingExample(e.candidates.without_last(), e.group_id) if e.added else e
            for e in examples
        ]
        dev = served.candidates(dev_texts, dev_vectors, judged, history)
        before = served_answers(fit_ranker(proposed_only, prior=starter), dev, dev_labels)
        now = served_answers(fit_ranker(examples, prior=starter), dev, dev_labels)
        row = {
            "verdicts": count,
            "added": int(sum(e.added for e in examples)),
            "proposed_only": calibration(before),
            "added_to_fit": calibration(now),
            "paired": paired(now["right"], before["right"]),
        }
        rows.append(row)
        low, high = row["paired"]["ci95"]
        print(
            f"{name:5} {count:6} {row['added']:6}  {row['proposed_only']['acc@1']:.3f} -> "
            f"{row['added_to_fit']['acc@1']:.3f}  {row['paired']['difference']:+.3f} "
            f"[{low:+.3f}, {high:+.3f}]  ECE {row['proposed_only']['ece']:.3f} -> "
            f"{row['added_to_fit']['ece']:.3f}  p>=0.9 {row['proposed_only']['share_p_0.9']:.3f}"
            f" -> {row['added_to_fit']['share_p_0.9']:.3f}",
            flush=True,
        )
    return {"dev_titles": len(dev_texts), "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--taxonomies", default="esco,onet")
    parser.add_argument("--verdicts", default="100,500,2000")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    counts = [int(n) for n in args.verdicts.split(",")]
    starter = LinearRanker.from_dict(json.loads(STARTER_FILE.read_text()))
    report: dict = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "taxonomies": {},
    }
    print("taxonomy verdicts added  acc@1 proposed only -> added  paired [95%]  ECE  p>=0.9 share")
    for name in args.taxonomies.split(","):
        if name == "esco":
            taxonomy = esco_taxonomy(args.data)
            encoder, search = title_tower_encoder(), SearchConfig(lexical_weight=0.0)
        else:
            taxonomy = onet_taxonomy(args.data)
            encoder, search = shipped_onet()
        served = Served(taxonomy, encoder, search, PRIOR_DESCRIPTION_WEIGHT)
        report["taxonomies"][name] = run(name, taxonomy, served, starter, counts)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
