"""Does the queue's order teach more than arrival order, and does it grow what the product can
code by itself? The curator stream judged in the order the review queue offers it against the
order it arrived in, measured on titles nobody judges.

The curator stream of ``bench/jobbert_data.py`` is the open queue: one item a distinct title,
its occurrences the times it comes in the stream. **Arrival order** judges titles as they first
arrive. **Queue order** judges them in rounds as the product does: the open titles ranked by
the live ranker (the shipped starter, then a fit on the verdicts so far pulled toward it, as
``ranker_fit`` does), ordered by ``verdict_worth`` and ``spread_near_copies``
(``models_app/siamese/ranker/active.py``), the best ``--round`` judged, refit, ordered again.
A judged title becomes a curator's member of its right group and, where the answer shown was
wrong, a rejection of that group. Two orders tried toward what the product can code by itself,
neither the product's: **vouching** (``vouching_worth``: the surest and the least sure answers
first) and **evidence** (half the titles, drawn at random, queued as audits are; the rest as the
queue orders them).

After 100, 500 and 2,000 verdicts: acc@1 of dev-unseen titles (never judged, never fitted on)
as served (the verdicts as curators' members and history) and by the model alone, each order's
own ranker; the difference paired on the same titles with a 95% bootstrap interval and
McNemar's p. Also what each order judged: distinct groups, and how often the answer shown was
wrong (what a verdict corrected). And what the product could code by itself at a 90% target:
the threshold the live ranker's evidence shows (``siamese.vouching``: the starter's before the
first fit, the fit's out-of-fold answers from ``MIN_OWN_EVIDENCE`` verdicts, none between), the
share of dev-unseen titles at or above it and how many of those the data's labels call right;
each order's share against arrival's, paired.

    .venv/bin/python bench/queue_order.py [--taxonomies esco,onet] [--verdicts 100,500,2000]
        [--orders queue,vouching,evidence]

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
from models_app.siamese.vouching import MIN_OWN_EVIDENCE, vouching_threshold  # noqa: E402

OUT = ROOT / "bench" / "results" / "queue_order.json"
TARGET = 0.90  # the auto-coding target measured


def vouching_worth(top_probability: np.ndarray, occurrences: np.ndarray) -> np.ndarray:
    """Vouching order: the surest and the least sure answers first, by traffic. A sure answer
    is evidence where the vouching threshold is drawn, a doubted one teaches the ranker."""
    sure = np.clip(np.asarray(top_probability, dtype=np.float64), 0.0, 1.0)
    seen = np.maximum(np.asarray(occurrences, dtype=np.float64), 1.0)
    return np.maximum(sure, 1.0 - sure) * (1.0 + np.log(seen))


# Evidence order: a share of the titles, drawn at random when they arrive, are queued as an
# audit is (``audit_priority``: the worth of an answer of a random probability), the rest by
# ``verdict_worth``: the verdicts hold a sample of the traffic as it comes.
EVIDENCE_SHARE = 0.5


def evidence_worth(stream_size: int, seed: int = 5):
    rng = np.random.default_rng(seed)
    drawn = rng.random(stream_size) < EVIDENCE_SHARE
    chance = rng.random(stream_size)

    def worth(probabilities, occurrences, rows):
        shown = np.where(drawn[rows], chance[rows], probabilities)
        return verdict_worth(shown, occurrences)

    return worth


def worth_alone(worth_of):
    def worth(probabilities, occurrences, rows):
        return worth_of(probabilities, occurrences)

    return lambda stream_size: worth


# Each order's worth of the open titles (probabilities, occurrences, their rows), by stream size.
WORTH = {
    "queue": worth_alone(verdict_worth),
    "vouching": worth_alone(vouching_worth),
    "evidence": evidence_worth,
}


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


def vouching_evidence(ranker, verdicts: int) -> dict | None:
    """The evidence the product would vouch with (``models_app/serving/vouching._evidence``):
    the starter's while it serves, the fit's own from ``MIN_OWN_EVIDENCE`` verdicts, else none."""
    evidence = (ranker.metrics or {}).get("evidence")
    if verdicts >= MIN_EXAMPLES and verdicts < MIN_OWN_EVIDENCE:
        return None
    return evidence


def measure(served, stream, judged, shown, dev_texts, dev_vectors, dev_labels, ranker) -> dict:
    members, history, _ = judged_state(served, stream, judged, shown)
    as_served = served.candidates(dev_texts, dev_vectors, members, history)
    alone = served.candidates(dev_texts, dev_vectors)
    served_top, served_probability = top_answers(ranker, as_served)
    alone_top, _ = top_answers(ranker, alone)
    evidence = vouching_evidence(ranker, len(judged))
    found = (
        vouching_threshold(evidence["probabilities"], evidence["right"], target=TARGET)
        if evidence
        else None
    )
    threshold = found.threshold if found is not None else None
    coded = (
        served_probability >= threshold if threshold is not None else np.zeros(len(dev_texts), bool)
    )
    return {
        "served": served_top == dev_labels,
        "model_alone": alone_top == dev_labels,
        "coded": coded,
        "threshold": threshold,
        "evidence": 0 if evidence is None else len(evidence["right"]),
    }


def run_taxonomy(
    name: str, data: Path, checkpoints: list[int], round_size: int, orders: list[str]
) -> dict:
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
    results: dict[str, dict[int, dict]] = {"arrival": {}}
    judged_by = {"arrival": arrival}
    shown = {order: starter_top.copy() for order in ("arrival", *orders)}
    for count in checkpoints:
        ranker = live_ranker(served, stream, arrival[:count], shown["arrival"])
        results["arrival"][count] = measure(served, stream, arrival[:count], shown["arrival"],
                                            dev_texts, dev_vectors, dev_labels, ranker)  # fmt: skip

    # Queue and vouching orders: rounds of the worthiest open titles under the live ranker,
    # refit after each.
    for order in orders:
        judged_by[order], results[order] = judge_in_rounds(
            served, stream, cold, starter_top,
            WORTH[order](len(stream.texts)),
            checkpoints, round_size,
            (dev_texts, dev_vectors, dev_labels), shown, order,
        )  # fmt: skip

    for count in checkpoints:
        row = {"verdicts": count}
        for order in ("arrival", *orders):
            rows = judged_by[order][:count]
            found = results[order][count]
            coded = found["coded"]
            row[order] = {
                "served_acc@1": round(float(found["served"].mean()), 4),
                "model_alone_acc@1": round(float(found["model_alone"].mean()), 4),
                "distinct_groups_judged": len(set(stream.labels[rows].tolist())),
                "answer_shown_was_wrong": round(
                    float((shown[order][rows] != stream.labels[rows]).mean()), 4
                ),
                "occurrences_covered": int(stream.occurrences[rows].sum()),
                "evidence_answers": found["evidence"],
                "threshold_at_target": found["threshold"],
                "coded_share": round(float(coded.mean()), 4),
                "coded_precision_by_labels": round(float(found["served"][coded].mean()), 4)
                if coded.any()
                else None,
            }
        for order in orders:
            for kind in ("served", "model_alone", "coded"):
                row[f"{order}_against_arrival_{kind}"] = paired(
                    results[order][count][kind], results["arrival"][count][kind]
                )
        report["rows"].append(row)
    return report


def judge_in_rounds(served, stream, cold, starter_top, worth_of, checkpoints, round_size, dev,
                    shown, order):  # fmt: skip
    """The stream judged in rounds of the open titles ``worth_of`` values most under the live
    ranker, refit after each; the judged rows and the measures at each checkpoint."""
    dev_texts, dev_vectors, dev_labels = dev
    last = max(checkpoints)
    judged: list[int] = []
    results: dict[int, dict] = {}
    open_rows = np.ones(len(stream.texts), dtype=bool)
    started = time.perf_counter()
    while len(judged) < last:
        ranker = live_ranker(served, stream, judged, shown[order])
        rows = np.flatnonzero(open_rows)
        if judged:
            members, history, _ = judged_state(served, stream, judged, shown[order])
            found = served.candidates([stream.texts[r] for r in rows], stream.vectors[rows],
                                      members, history)  # fmt: skip
        else:
            found = [cold[r] for r in rows]
        tops, probabilities = top_answers(ranker, found)
        worth = spread_near_copies(worth_of(probabilities, stream.occurrences[rows], rows), tops)
        take = rows[np.argsort(-worth, kind="stable")[: min(round_size, last - len(judged))]]
        shown[order][rows] = tops  # what the card showed when each was judged
        judged += take.tolist()
        open_rows[take] = False
        if len(judged) in checkpoints:
            ranker = live_ranker(served, stream, judged, shown[order])
            results[len(judged)] = measure(
                served, stream, judged, shown[order], dev_texts, dev_vectors, dev_labels, ranker
            )
            seconds = time.perf_counter() - started
            print(f"  {order} order: {len(judged)} verdicts ({seconds:.0f} s)", flush=True)
    return judged, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--taxonomies", default="esco,onet")
    parser.add_argument("--verdicts", default="100,500,2000")
    parser.add_argument("--orders", default="queue,vouching,evidence", help="besides arrival")
    parser.add_argument("--round", type=int, default=100, help="verdicts between refits")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    checkpoints = sorted(int(x) for x in args.verdicts.split(",") if x)
    orders = [order for order in args.orders.split(",") if order]
    report: dict = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "round": args.round,
        "target": TARGET,
        "taxonomies": {},
    }
    for name in args.taxonomies.split(","):
        report["taxonomies"][name] = run_taxonomy(name, args.data, checkpoints, args.round, orders)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    for name, section in report["taxonomies"].items():
        print(
            f"\n{name}: {section['dev_titles']} dev-unseen titles; coded at a {TARGET:.0%} target"
        )
        print(f"{'verdicts':>9} {'order':>9} {'served':>7} {'alone':>7} {'wrong':>6} "
              f"{'coded':>6} {'prec.':>6}  served / coded against arrival (95% CI)")  # fmt: skip
        for row in section["rows"]:
            for order in ("arrival", *orders):
                cells = row[order]
                versus = ""
                if order != "arrival":
                    d = row[f"{order}_against_arrival_served"]
                    c = row[f"{order}_against_arrival_coded"]
                    versus = (f"{d['difference']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]"
                              f" / {c['difference']:+.3f} [{c['ci95'][0]:+.3f}, "
                              f"{c['ci95'][1]:+.3f}]")  # fmt: skip
                precision = cells["coded_precision_by_labels"]
                precision = "-" if precision is None else f"{precision:.3f}"
                print(f"{row['verdicts']:>9} {order:>9} {cells['served_acc@1']:7.3f} "
                      f"{cells['model_alone_acc@1']:7.3f} {cells['answer_shown_was_wrong']:6.3f} "
                      f"{cells['coded_share']:6.3f} "
                      f"{precision:>6}  {versus}")  # fmt: skip
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
