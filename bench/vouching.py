"""Answers the product can vouch for: how honest the probability is where the labels can be
trusted, and what share of traffic it could code by itself at a target precision.

Measured before any verdict (the starter ranker) and after 500 and 2,000 curators' verdicts
(the taxonomy's own fit, pulled toward the starter), on two kinds of real traffic whose labels
agree with themselves:

- consistently labelled vacancy titles: JobBERT's dev-unseen titles that occur more than once,
  always with the same label (``consistently_labelled``), against ESCO (the title tower) and
  O*NET through Nesta's crosswalk (the shipped student);
- clean titles: 2,000 O*NET alternate titles held out of the taxonomy (``bench/title_tower.py``
  holds the same ones out of the tower's training), answered by the title tower as a new
  taxonomy serves it.

Per set: acc@1, the expected calibration error with a 95% bootstrap interval and what a
perfectly calibrated probability would read on as many titles (sampling's floor), the answers at
p >= 0.9 and the share right among them, coverage at 95% and 90% precision taking the surest
answers first, and auto-coding: the threshold ``vouching_threshold`` derives for a target from
the evidence the product has before any verdict (the stream's consistently labelled titles,
never the measured ones; after verdicts, the fit's own out-of-fold answers, as the product
does), the share it codes and its realized precision. Each set is shown with
the starter calibrated on every stream title (before) and on the consistent ones (ships), a
sample of the sure answers the labels call wrong, to read, and how right the surest 40% of
answers are (the share issue #53 asks to code at 95% on clean titles) with a sample of the
clean ones the labels call wrong.

    .venv/bin/python bench/vouching.py

Prints tables and writes bench/results/vouching.json.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench.jobbert_data import SHARED_DATA, consistently_labelled  # noqa: E402
from bench.ranker import (  # noqa: E402
    CACHE,
    Served,
    Taxonomy,
    esco_taxonomy,
    onet_taxonomy,
    title_tower_encoder,
    with_short_forms,
)
from bench.starter_ranker import (  # noqa: E402
    TAXONOMIES,
    candidate_sets,
    consistent_examples,
    starter_examples,
)
from bench.title_tower import clean_held_out, without  # noqa: E402
from models_app.siamese.calibration import expected_calibration_error  # noqa: E402
from models_app.siamese.ranker.features import FEATURE_SET  # noqa: E402
from models_app.siamese.ranker.files import cold_start_ranker  # noqa: E402
from models_app.siamese.ranker.model import (  # noqa: E402
    PRIOR_DESCRIPTION_WEIGHT,
    LinearRanker,
    RankingExample,
    fit_ranker,
    hand_prior,
)
from models_app.siamese.search import SearchConfig  # noqa: E402
from models_app.siamese.vouching import precision_lower_bound, vouching_threshold  # noqa: E402

OUT = ROOT / "bench" / "results" / "vouching.json"
VERDICTS = (500, 2000)
TARGETS = (0.95, 0.90)
BOOTSTRAP = 1000
WRONG_SAMPLE = 25
# The share of clean titles issue #53 asks to code at 95%: how right the surest this share is,
# and a seeded sample of the answers in it that the labels call wrong, to be read.
SUREST_SHARE = 0.4
SUREST_SAMPLE = 30
SHIPS = "starter calibrated on consistent titles (ships)"
CLEAN = "O*NET alternate titles held out (clean)"


def clean_set(data: Path) -> dict:
    """The held-out O*NET alternate titles' candidates, served by the title tower over the
    taxonomy without them (cached)."""
    onet = onet_taxonomy(data, short_forms=False)
    encoder = title_tower_encoder()
    path = CACHE / f"vouching-clean-short-forms-{encoder.name}-{FEATURE_SET}.pkl"
    if path.exists():
        return pickle.loads(path.read_bytes())
    held, gone = clean_held_out(onet)
    # The import's short forms of the titles kept, none of a title held out.
    kept = Taxonomy("onet-clean", onet.codes, onet.names, onet.descriptions,
                    with_short_forms(without(onet.members, gone)), [], [])  # fmt: skip
    served = Served(kept, encoder, SearchConfig(lexical_weight=0.0), PRIOR_DESCRIPTION_WEIGHT)
    texts = [text for text, _ in held]
    found = {
        "texts": texts,
        "labels": np.array([group for _, group in held]),
        "candidates": served.candidates(texts, encoder.vectors(texts)),
        "names": onet.names,
    }
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(found))
    return found


def top_answers(ranker: LinearRanker, candidates, labels) -> tuple[np.ndarray, np.ndarray, list]:
    """Per text: whether its top group is right, its probability, and the top group."""
    right, probability, top = [], [], []
    for c, label in zip(candidates, labels, strict=True):
        if not len(c):
            right.append(False)
            probability.append(0.0)
            top.append(-1)
            continue
        scores = ranker.scores(c.features)
        best = int(np.argmax(scores))
        right.append(bool(c.groups[best] == label))
        probability.append(float(ranker.probabilities(scores, float(c.similarity.max()))[best]))
        top.append(int(c.groups[best]))
    return np.array(right), np.array(probability), top


def coverage_at(right: np.ndarray, p: np.ndarray, precision: float) -> float:
    """The largest share of answers, surest first, whose precision is at least ``precision``."""
    order = np.argsort(-p, kind="stable")
    running = np.cumsum(right[order]) / np.arange(1, len(order) + 1)
    reached = np.flatnonzero(running >= precision)
    return float((reached[-1] + 1) / len(order)) if len(reached) else 0.0


def ece_interval(right: np.ndarray, p: np.ndarray) -> list[float]:
    rng = np.random.default_rng(0)
    samples = rng.integers(0, len(p), size=(BOOTSTRAP, len(p)))
    values = [expected_calibration_error(p[s], right[s]) for s in samples]
    return [round(float(v), 4) for v in np.percentile(values, [2.5, 97.5])]


def ece_if_calibrated(p: np.ndarray, observed: float) -> dict:
    """What a perfectly calibrated probability would read on these titles: each answer right
    with exactly its probability, drawn BOOTSTRAP times. Its median and 95th percentile are the
    ECE that sampling alone gives at this many titles, and ``share_at_least_observed`` is how
    often it reads the observed ECE or more (a one-sided test of miscalibration)."""
    rng = np.random.default_rng(1)
    values = np.array(
        [expected_calibration_error(p, rng.random(len(p)) < p) for _ in range(BOOTSTRAP)]
    )
    return {
        "median": round(float(np.median(values)), 4),
        "p95": round(float(np.percentile(values, 95)), 4),
        "share_at_least_observed": round(float((values >= observed).mean()), 4),
    }


def measured(right: np.ndarray, p: np.ndarray, thresholds: dict) -> dict:
    sure = p >= 0.9
    ece = expected_calibration_error(p, right)
    row = {
        "titles": len(p),
        "acc@1": round(float(right.mean()), 4),
        "mean_probability": round(float(p.mean()), 4),
        "ece": round(ece, 4),
        "ece_ci95": ece_interval(right, p),
        "ece_if_calibrated": ece_if_calibrated(p, ece),
        "share_at_least_0_9": round(float(sure.mean()), 4),
        "right_among_at_least_0_9": round(float(right[sure].mean()), 4) if sure.any() else None,
        "right_among_at_least_0_9_lower_bound":
            round(precision_lower_bound(int(right[sure].sum()), int(sure.sum())), 4),
        "coverage_at_95": round(coverage_at(right, p, 0.95), 4),
        "coverage_at_90": round(coverage_at(right, p, 0.90), 4),
        "right_among_surest_40": round(float(right[surest(p)].mean()), 4),
        "auto_coded": {},
    }  # fmt: skip
    for target, threshold in thresholds.items():
        if threshold is None:
            row["auto_coded"][str(target)] = {"threshold": None, "share": 0.0}
            continue
        coded = p >= threshold
        row["auto_coded"][str(target)] = {
            "threshold": round(threshold, 4),
            "share": round(float(coded.mean()), 4),
            "precision": round(float(right[coded].mean()), 4) if coded.any() else None,
            "answers": int(coded.sum()),
        }
    return row


def surest(p: np.ndarray) -> np.ndarray:
    """The rows of the surest ``SUREST_SHARE`` of answers."""
    return np.argsort(-p, kind="stable")[: max(1, round(SUREST_SHARE * len(p)))]


def wrong_among_surest(right, p, top, texts, labels, names) -> list[dict]:
    """A seeded sample of the answers among the surest ``SUREST_SHARE`` that the labels call
    wrong: whether the labels or the answers are wrong is read, not counted."""
    rows = [int(i) for i in surest(p) if not right[i]]
    rows = sorted(np.random.default_rng(0).permutation(rows)[:SUREST_SAMPLE].tolist())
    return [
        {"title": texts[i], "answer": names[top[i]], "label": names[int(labels[i])],
         "probability": round(float(p[i]), 3)}
        for i in rows
    ]  # fmt: skip


def wrong_sure(right, p, top, texts, labels, names) -> list[dict]:
    """The sure answers (p >= 0.9) the labels call wrong, surest first, to be read."""
    rows = [i for i in np.argsort(-p, kind="stable") if p[i] >= 0.9 and not right[i]]
    return [
        {"title": texts[i], "answer": names[top[i]], "label": names[int(labels[i])],
         "probability": round(float(p[i]), 3)}
        for i in rows[:WRONG_SAMPLE]
    ]  # fmt: skip


def evidence_row(found) -> dict:
    return {
        "threshold": found.threshold,
        "answers": found.answers,
        "right": found.right,
        "lower_bound": round(found.lower_bound, 4),
        "coverage": round(found.coverage, 4),
        "evidence": found.evidence,
        "more_needed": found.more_needed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    sets = {name: candidate_sets(name, args.data, list(VERDICTS)) for name in TAXONOMIES}
    consistent = {name: consistent_examples(name, args.data, sets[name]) for name in TAXONOMIES}
    clean = clean_set(args.data)

    shipped = cold_start_ranker()
    examples = [e for name in TAXONOMIES for e in starter_examples(sets[name])]
    rankers = {
        "starter calibrated on every stream title": fit_ranker(examples, prior=hand_prior()),
        SHIPS: shipped,
    }
    # The evidence the product holds before any verdict: the starter's answers on the stream's
    # consistently labelled titles (the measured titles are never part of it).
    evidence = {}
    for label, ranker in rankers.items():
        cold = [e for name in TAXONOMIES for e in consistent[name][0]]
        right, p, _ = top_answers(ranker, [e.candidates for e in cold], [e.group_id for e in cold])
        evidence[label] = {t: vouching_threshold(p, right, target=t) for t in TARGETS}

    measures: dict[str, dict] = {}
    sample: dict[str, list] = {}
    surest_sample: dict[str, list] = {}

    def measure(set_name, stage, label, ranker, candidates, labels, texts, names, thresholds):
        right, p, top = top_answers(ranker, candidates, labels)
        row = measured(right, p, thresholds)
        measures.setdefault(set_name, {}).setdefault(stage, {})[label] = row
        if label == SHIPS or stage != "before any verdict":
            sample[f"{set_name}, {stage}, {label}"] = wrong_sure(right, p, top, texts, labels,
                                                                 names)  # fmt: skip
        if label == SHIPS and set_name == CLEAN:
            surest_sample[label] = wrong_among_surest(right, p, top, texts, labels, names)

    for name in TAXONOMIES:
        served_names = esco_taxonomy(args.data) if name == "esco" else onet_taxonomy(args.data)
        dev_texts = [text for text, _ in served_names.dev]
        labels = sets[name]["dev_labels"]
        rows = consistently_labelled(dev_texts, labels)
        texts = [dev_texts[r] for r in rows]
        set_name = f"{name} vacancy titles, consistently labelled (dev-unseen)"
        for label, ranker in rankers.items():
            thresholds = {t: f.threshold for t, f in evidence[label].items()}
            measure(set_name, "before any verdict", label, ranker,
                    [sets[name]["dev_cold"][r] for r in rows], labels[rows], texts,
                    served_names.names, thresholds)  # fmt: skip
        for count in VERDICTS:
            warm = sets[name]["warm"][count]
            verdicts = [
                RankingExample(c, int(g))
                for c, g in zip(warm, sets[name]["stream_labels"][: len(warm)], strict=True)
            ]
            fitted = fit_ranker(verdicts, prior=shipped)
            # As the product does past MIN_OWN_EVIDENCE verdicts: the threshold from the fit's
            # own out-of-fold answers (here judged by the data's labels, noise and all).
            own = fitted.metrics["evidence"]
            own_thresholds = {
                t: vouching_threshold(own["probabilities"], own["right"], target=t).threshold
                for t in TARGETS
            }
            measure(set_name, f"after {count} verdicts", "the taxonomy's fit from the starter",
                    fitted, [sets[name]["dev_served"][count][r] for r in rows], labels[rows],
                    texts, served_names.names, own_thresholds)  # fmt: skip
    for label, ranker in rankers.items():
        thresholds = {t: f.threshold for t, f in evidence[label].items()}
        measure(CLEAN, "before any verdict", label, ranker,
                clean["candidates"], clean["labels"], clean["texts"], clean["names"],
                thresholds)  # fmt: skip

    report = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "feature_set": FEATURE_SET,
        "evidence_before_any_verdict": {
            label: {str(t): evidence_row(f) for t, f in found.items()}
            for label, found in evidence.items()
        },
        "sets": measures,
        "wrong_sure_answers": sample,
        "wrong_among_surest_clean": surest_sample,
    }  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False))

    for label, found in report["evidence_before_any_verdict"].items():
        print(f"evidence before any verdict, {label}:")
        for target, f in found.items():
            print(f"  target {target}: threshold {f['threshold']}, {f['answers']} of "
                  f"{f['evidence']} answers, lower bound {f['lower_bound']}")  # fmt: skip
    header = f"{'':52}{'n':>5}{'acc@1':>7}{'ECE':>7}{'ECE 95% CI':>16}{'calib.':>7}"
    header += f"{'p>=.9':>7}{'right':>7}"
    header += f"{'cov95':>7}{'cov90':>7}{'auto95':>8}{'prec':>6}{'auto90':>8}{'prec':>6}"
    for set_name, stages in measures.items():
        print(f"\n{set_name}\n{header}")
        for stage, rows in stages.items():
            for label, row in rows.items():
                right = row["right_among_at_least_0_9"]
                auto = []
                for target in TARGETS:
                    coded = row["auto_coded"][str(target)]
                    precision = coded.get("precision")
                    auto.append(
                        f"{coded['share']:8.3f}"
                        + (f"{precision:6.3f}" if precision is not None else f"{'-':>6}")
                    )
                print(f"{(stage + ': ' + label)[:51]:52}{row['titles']:5}{row['acc@1']:7.3f}"
                      f"{row['ece']:7.3f}{row['ece_ci95']!s:>16}"
                      f"{row['ece_if_calibrated']['median']:7.3f}"
                      f"{row['share_at_least_0_9']:7.3f}"
                      + (f"{right:7.3f}" if right is not None else f"{'-':>7}")
                      + f"{row['coverage_at_95']:7.3f}{row['coverage_at_90']:7.3f}"
                      + "".join(auto))  # fmt: skip
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
