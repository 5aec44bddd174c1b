"""Does the queue's order teach more than arrival order? The curator stream judged in the order
the review queue offers it against the order it arrived in, measured on titles nobody judges.

The curator stream of ``bench/jobbert_data.py`` is the open queue: one item a distinct title,
its occurrences the times it comes in the stream. **Arrival order** judges titles as they first
arrive. **Queue order** judges them in rounds as the product does: the open titles ranked by
the live ranker (the shipped starter, then a fit on the verdicts so far pulled toward it, as
``ranker_fit`` does), ordered by ``verdict_worth`` and ``spread_near_copies``
(``models_app/siamese/ranker/active.py``), the best ``--round`` judged, refit, ordered again.
A judged title becomes a curator's member of its right group and, where the answer shown was
wrong, a rejection of that group.

After 100, 500 and 1,000 verdicts: acc@1 of dev-unseen titles (never judged, never fitted on)
as served (the verdicts as curators' members and history) and by the model alone, each order's
own ranker; the difference paired on the same titles with a 95% bootstrap interval and
McNemar's p. Also what each order judged: distinct groups, and how often the answer shown was
wrong (what a verdict corrected).

    .venv/bin/python bench/queue_order.py [--taxonomies esco,onet] [--verdicts 100,500,1000]

Prints a table and writes bench/results/queue_order.json.
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
from bench.ranker import history_of  # noqa: E402
from bench.real_accuracy import paired  # noqa: E402
from bench.starter_ranker import served_taxonomy  # noqa: E402
from models_app.siamese.ranker.active import spread_near_copies, verdict_worth  # noqa: E402
from models_app.siamese.ranker.files import cold_start_ranker  # noqa: E402
from models_app.siamese.ranker.model import MIN_EXAMPLES, RankingExample, fit_ranker  # noqa: E402
from models_app.siamese.ranker.verdict_history import OwnVerdict  # noqa: E402
from models_app.siamese.text import comparison_key  # noqa: E402

OUT = ROOT / "bench" / "results" / "queue_order.json"


class Stream:
    """The open queue: distinct stream titles in arrival order, with labels and occurrences."""

    def __init__(self, taxonomy, served) -> None:
        first: dict[str, int] = {}
        counts: dict[str, int] = {}
        texts, labels = [], []
        for text, label in taxonomy.stream:
            key = comparison_key(text)
            counts[key] = counts.get(key, 0) + 1
            if key not in first:
                first[key] = len(texts)
                texts.append(text)
                labels.append(label)
        self.texts = texts
        self.labels = np.array(labels)
        self.occurrences = np.array([counts[comparison_key(t)] for t in texts])
        self.vectors = served.encoder.vectors(texts)


def judged_state(served, stream: Stream, judged: list[int], shown: np.ndarray):
    """Curators' members, history and own verdicts of the judged titles (``shown``: the group
    each was shown on top when judged, rejected where wrong)."""
    rows = np.array(judged, dtype=np.int64)
    labels, vectors = stream.labels[rows], stream.vectors[rows]
    history, rejected_rows = history_of(labels, shown[rows], vectors, served.groups_count)
    members = ([stream.texts[r] for r in rows], labels, vectors)
    own = [([j], OwnVerdict(int(labels[j]), tuple(rejected_rows[j]))) for j in range(len(rows))]
    return members, history, own


def live_ranker(served, stream: Stream, judged: list[int], shown: np.ndarray):
    """The ranker the product would serve after these verdicts: the starter, or once 20
    verdicts are in, a fit on them pulled toward it."""
    starter = cold_start_ranker()
    if len(judged) < MIN_EXAMPLES:
        return starter
    members, history, own = judged_state(served, stream, judged, shown)
    texts = [stream.texts[r] for r in judged]
    found = served.candidates(texts, stream.vectors[judged], members, history, own)
    examples = [
        RankingExample(c, int(stream.labels[r])) for c, r in zip(found, judged, strict=True)
    ]
    return fit_ranker(examples, prior=starter)


def top_answers(ranker, candidates):
    """Per text its top group and that group's probability."""
    tops, probabilities = [], []
    for c in candidates:
        if not len(c):
            tops.append(-1)
            probabilities.append(0.0)
            continue
        scores = ranker.scores(c.features)
        top = int(np.argmax(scores))
        tops.append(int(c.groups[top]))
        found = ranker.probabilities(scores, float(c.similarity.max()))
        probabilities.append(float(found[top]) if found is not None else 0.0)
    return np.array(tops), np.array(probabilities)


def measure(served, stream, judged, shown, dev_texts, dev_vectors, dev_labels, ranker) -> dict:
    members, history, _ = judged_state(served, stream, judged, shown)
    as_served = served.candidates(dev_texts, dev_vectors, members, history)
    alone = served.candidates(dev_texts, dev_vectors)
    served_top, _ = top_answers(ranker, as_served)
    alone_top, _ = top_answers(ranker, alone)
    return {"served": served_top == dev_labels, "model_alone": alone_top == dev_labels}


def run_taxonomy(name: str, data: Path, checkpoints: list[int], round_size: int) -> dict:
    taxonomy, served = served_taxonomy(name, data)
    served.groups_count = len(taxonomy.codes)
    stream = Stream(taxonomy, served)
    dev_texts = [t for t, _ in taxonomy.dev]
    dev_labels = np.array([g for _, g in taxonomy.dev])
    dev_vectors = served.encoder.vectors(dev_texts)
    print(f"\n== {name}: {len(stream.texts)} distinct stream titles, {len(dev_texts)} dev-unseen")
    cold = served.candidates(stream.texts, stream.vectors)
    starter_top, _ = top_answers(cold_start_ranker(), cold)
    last = max(checkpoints)
    report: dict = {"stream_titles": len(stream.texts), "dev_titles": len(dev_texts), "rows": []}

    # Arrival order: titles as they first came; the answer shown is the starter's (no fit yet).
    arrival = list(range(last))
    results: dict[str, dict[int, dict]] = {"arrival": {}, "queue": {}}
    judged_by = {"arrival": arrival}
    shown = {"arrival": starter_top.copy(), "queue": starter_top.copy()}
    for count in checkpoints:
        ranker = live_ranker(served, stream, arrival[:count], shown["arrival"])
        results["arrival"][count] = measure(served, stream, arrival[:count], shown["arrival"],
                                            dev_texts, dev_vectors, dev_labels, ranker)  # fmt: skip

    # Queue order: rounds of the worthiest open titles under the live ranker, refit after each.
    judged: list[int] = []
    open_rows = np.ones(len(stream.texts), dtype=bool)
    started = time.perf_counter()
    while len(judged) < last:
        ranker = live_ranker(served, stream, judged, shown["queue"])
        if judged:
            members, history, _ = judged_state(served, stream, judged, shown["queue"])
            rows = np.flatnonzero(open_rows)
            found = served.candidates([stream.texts[r] for r in rows], stream.vectors[rows],
                                      members, history)  # fmt: skip
        else:
            rows = np.flatnonzero(open_rows)
            found = [cold[r] for r in rows]
        tops, probabilities = top_answers(ranker, found)
        worth = spread_near_copies(verdict_worth(probabilities, stream.occurrences[rows]), tops)
        take = rows[np.argsort(-worth, kind="stable")[: min(round_size, last - len(judged))]]
        shown["queue"][rows] = tops  # what the card showed when each was judged
        judged += take.tolist()
        open_rows[take] = False
        if len(judged) in checkpoints:
            ranker = live_ranker(served, stream, judged, shown["queue"])
            results["queue"][len(judged)] = measure(
                served, stream, judged, shown["queue"], dev_texts, dev_vectors, dev_labels, ranker
            )
            print(f"  queue order: {len(judged)} verdicts ({time.perf_counter() - started:.0f} s)",
                  flush=True)  # fmt: skip
    judged_by["queue"] = judged

    for count in checkpoints:
        row = {"verdicts": count}
        for order in ("arrival", "queue"):
            rows = judged_by[order][:count]
            row[order] = {
                "served_acc@1": round(float(results[order][count]["served"].mean()), 4),
                "model_alone_acc@1": round(float(results[order][count]["model_alone"].mean()), 4),
                "distinct_groups_judged": len(set(stream.labels[rows].tolist())),
                "answer_shown_was_wrong": round(
                    float((shown[order][rows] != stream.labels[rows]).mean()), 4
                ),
                "occurrences_covered": int(stream.occurrences[rows].sum()),
            }
        for kind in ("served", "model_alone"):
            row[f"queue_against_arrival_{kind}"] = paired(
                results["queue"][count][kind], results["arrival"][count][kind]
            )
        report["rows"].append(row)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--taxonomies", default="esco,onet")
    parser.add_argument("--verdicts", default="100,500,1000")
    parser.add_argument("--round", type=int, default=100, help="verdicts between refits")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    checkpoints = sorted(int(x) for x in args.verdicts.split(",") if x)
    report: dict = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "round": args.round,
        "taxonomies": {},
    }
    for name in args.taxonomies.split(","):
        report["taxonomies"][name] = run_taxonomy(name, args.data, checkpoints, args.round)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    for name, section in report["taxonomies"].items():
        print(f"\n{name}: {section['dev_titles']} dev-unseen titles")
        print(f"{'verdicts':>9} {'order':>8} {'served':>7} {'alone':>7} {'groups':>7} "
              f"{'wrong':>6}  served, queue - arrival (95% CI)")  # fmt: skip
        for row in section["rows"]:
            for order in ("arrival", "queue"):
                cells = row[order]
                versus = ""
                if order == "queue":
                    d = row["queue_against_arrival_served"]
                    versus = f"{d['difference']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]"
                print(f"{row['verdicts']:>9} {order:>8} {cells['served_acc@1']:7.3f} "
                      f"{cells['model_alone_acc@1']:7.3f} {cells['distinct_groups_judged']:7d} "
                      f"{cells['answer_shown_was_wrong']:6.3f}  {versus}")  # fmt: skip
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
