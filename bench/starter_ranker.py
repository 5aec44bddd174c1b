"""The starter ranker: fitted on real labelled vacancy titles, every taxonomy's cold start.

Fits the ranker (``models_app.siamese.ranker``) on the judged part of JobBERT's dev split (the
curator stream of ``bench/jobbert_data.py``; dev-unseen titles are only measured) against two
taxonomies served as the product serves them: ESCO with the title tower (what a new taxonomy
serves first) and O*NET, through Nesta's crosswalk, with the shipped student. Each stream title
gives two examples: cold (no curator's member, no verdict history: a taxonomy's first minute)
and warm (the first 2,000 stream titles judged as curators' members and history, each example
without its own verdict), so the starter knows what verdicts are worth before a taxonomy has
any. The linear weights learn from every stream title, then a residual network over them
(``models_app/siamese/ranker/residual.py``) from every one but the consistently labelled
titles (``consistently_labelled``), on which the probability is calibrated: fitted on labels
that disagree with themselves, it learns to doubt right answers (``bench/vouching.py`` measures
it).

Measured on dev-unseen titles, paired against the hand-written prior on the same titles:
- the starter fitted on both taxonomies' titles (what ships), the same without its residual
  network (paired), and fitted on one taxonomy's titles alone measured on the other's
  (transfer to a taxonomy and an encoder it never saw);
- its calibration before any verdict: expected calibration error, answers at p >= 0.9 and
  the share right among them;
- the taxonomy's own verdicts taking over: a fit on the first N stream verdicts pulled toward
  the starter (the product's refit) against one pulled toward the hand prior (before);
- when two groups are tied: the top two probabilities' gap below which the top group is not
  right more often than the runner-up (``TIE_GAP`` in models_app/serving/normalize.py).

    .venv/bin/python bench/starter_ranker.py [--write] [--verdicts 500,2000]

``--write`` stores the starter in models_app/siamese/resources/starter_ranker.json (weights
and calibration only: no title). Prints tables and writes bench/results/starter_ranker.json.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import sys
import time
from itertools import chain
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench.jobbert_data import SHARED_DATA, consistently_labelled  # noqa: E402
from bench.ranker import (  # noqa: E402
    CACHE,
    Served,
    esco_taxonomy,
    history_of,
    onet_taxonomy,
    shipped_onet,
    title_tower_encoder,
)
from bench.real_accuracy import paired  # noqa: E402
from models_app.siamese.calibration import expected_calibration_error  # noqa: E402
from models_app.siamese.ranker.features import FEATURE_SET  # noqa: E402
from models_app.siamese.ranker.files import STARTER_FILE  # noqa: E402
from models_app.siamese.ranker.model import (  # noqa: E402
    PRIOR_DESCRIPTION_WEIGHT,
    LinearRanker,
    RankingExample,
    fit_ranker,
    hand_prior,
    recalibrated,
    top_answer_evidence,
    with_residual,
)
from models_app.siamese.ranker.residual import ResidualConfig  # noqa: E402
from models_app.siamese.ranker.verdict_history import OwnVerdict  # noqa: E402
from models_app.siamese.search import SearchConfig  # noqa: E402
from models_app.siamese.text import comparison_key  # noqa: E402

OUT = ROOT / "bench" / "results" / "starter_ranker.json"
WARM = 2000  # stream verdicts the warm examples see as curators' members and history
TAXONOMIES = ("esco", "onet")


def served_taxonomy(name: str, data: Path) -> tuple:
    """A taxonomy served as the product serves it: ESCO with the pretrained tower a new
    taxonomy serves (the title tower), O*NET with the shipped student and its search."""
    if name == "esco":
        taxonomy = esco_taxonomy(data)
        encoder, search = title_tower_encoder(), SearchConfig(lexical_weight=0.0)
    else:
        taxonomy = onet_taxonomy(data)
        encoder, search = shipped_onet()
    return taxonomy, Served(taxonomy, encoder, search, PRIOR_DESCRIPTION_WEIGHT)


def judged_setting(served: Served, texts, labels, vectors, count: int):
    """The first ``count`` stream titles as curators' members and history (a reassigned title
    rejects the cold answer), and per title its own verdict to leave out."""
    cold = served.candidates(texts[:count], vectors[:count])
    cold_top = np.array(
        [int(c.groups[np.argmax(served.prior.scores(c.features))]) if len(c) else -1 for c in cold]
    )
    history, rejected_rows = history_of(
        labels[:count], cold_top, vectors[:count], served.groups_count
    )
    keys = [comparison_key(t) for t in texts[:count]]
    same: dict[str, list[int]] = {}
    for j, key in enumerate(keys):
        same.setdefault(key, []).append(j)
    own = []
    for j in range(count):
        twins = same[keys[j]]  # the verdicts on this very text are left out with it
        rows = tuple(r for t in twins for r in rejected_rows[t])
        own.append((twins, OwnVerdict(int(labels[j]), rows)))
    judged = (texts[:count], labels[:count], vectors[:count])
    return judged, history, own


def candidate_sets(name: str, data: Path, verdict_counts: list[int]) -> dict:
    """Every candidate set the measurements need, cached by feature set (minutes to build)."""
    taxonomy, served = served_taxonomy(name, data)
    counts = "-".join(map(str, verdict_counts))
    path = CACHE / f"starter-{name}-{served.encoder.name}-{FEATURE_SET}-{counts}.pkl"
    if path.exists():
        return pickle.loads(path.read_bytes())
    served.groups_count = len(taxonomy.codes)
    dev_texts = [t for t, _ in taxonomy.dev]
    stream = [t for t, _ in taxonomy.stream]
    labels = np.array([g for _, g in taxonomy.stream])
    dev_vectors = served.encoder.vectors(dev_texts)
    vectors = served.encoder.vectors(stream)
    started = time.perf_counter()
    sets = {
        "dev_labels": np.array([g for _, g in taxonomy.dev]),
        "stream_labels": labels,
        "dev_cold": served.candidates(dev_texts, dev_vectors),
        "stream_cold": served.candidates(stream, vectors),
        "warm": {},
        "dev_served": {},
    }
    for count in sorted({WARM, *verdict_counts}):
        judged, history, own = judged_setting(served, stream, labels, vectors, count)
        sets["warm"][count] = served.candidates(
            stream[:count], vectors[:count], judged, history, own
        )
        sets["dev_served"][count] = served.candidates(dev_texts, dev_vectors, judged, history)
    print(f"  {name}: candidates in {time.perf_counter() - started:.0f} s", flush=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(sets))
    return sets


def starter_examples(sets: dict) -> list[RankingExample]:
    labels = sets["stream_labels"]
    examples = [RankingExample(c, int(g)) for c, g in zip(sets["stream_cold"], labels, strict=True)]
    warm = sets["warm"][WARM]
    examples += [RankingExample(c, int(g)) for c, g in zip(warm, labels[: len(warm)], strict=True)]
    return examples


def consistent_examples(name: str, data: Path, sets: dict) -> tuple[list, list]:
    """The stream's consistently labelled titles as examples: (cold, warm for those among the
    first ``WARM``), the evidence the starter's probability is calibrated on."""
    taxonomy = esco_taxonomy(data) if name == "esco" else onet_taxonomy(data)
    labels = sets["stream_labels"]
    rows = consistently_labelled([text for text, _ in taxonomy.stream], labels)
    warm = sets["warm"][WARM]
    cold = [RankingExample(sets["stream_cold"][r], int(labels[r])) for r in rows]
    return cold, [RankingExample(warm[r], int(labels[r])) for r in rows if r < len(warm)]


def fit_starter(
    sets: dict,
    consistent: dict,
    fitted_on: tuple[str, ...],
    *,
    residual: bool = True,
    size: ResidualConfig | None = None,
) -> LinearRanker:
    """Weights fitted on every stream title of ``fitted_on``'s taxonomies, then (``residual``)
    the residual network (of ``size``, the product's by default) on every one but the
    consistently labelled, on which the probability is calibrated: the evidence the product
    vouches with is scored by a network that never saw it."""
    examples = [e for name in fitted_on for e in starter_examples(sets[name])]
    calibration = [e for name in fitted_on for e in chain(*consistent[name])]
    fitted = fit_ranker(examples, prior=hand_prior())
    if residual:
        kept_out = {id(e.candidates) for e in calibration}
        learning = [e for e in examples if id(e.candidates) not in kept_out]
        fitted = with_residual(fitted, learning, size)
    return recalibrated(fitted, calibration)


def answers(ranker: LinearRanker, candidates, labels) -> dict:
    """Per title: top right, runner-up right, top and runner-up probabilities."""
    top_right, second_right, p1, p2 = [], [], [], []
    for c, label in zip(candidates, labels, strict=True):
        if not len(c):
            top_right.append(False)
            second_right.append(False)
            p1.append(0.0)
            p2.append(0.0)
            continue
        scores = ranker.scores(c.features)
        order = np.argsort(-scores, kind="stable")
        top_right.append(bool(c.groups[order[0]] == label))
        second_right.append(len(order) > 1 and bool(c.groups[order[1]] == label))
        found = ranker.probabilities(scores, float(c.similarity.max()))
        p1.append(float(found[order[0]]) if found is not None else float("nan"))
        p2.append(float(found[order[1]]) if found is not None and len(order) > 1 else 0.0)
    return {
        "top_right": np.array(top_right),
        "second_right": np.array(second_right),
        "p1": np.array(p1),
        "p2": np.array(p2),
    }


def summary(found: dict) -> dict:
    hits, p = found["top_right"], found["p1"]
    row = {"acc@1": round(float(hits.mean()), 4), "n": len(hits)}
    if not np.isnan(p).any():
        high = p >= 0.9
        row.update(
            ece=round(expected_calibration_error(p, hits), 4),
            mean_probability=round(float(p.mean()), 4),
            max_probability=round(float(p.max()), 4),
            share_at_least_0_9=round(float(high.mean()), 4),
            right_among_at_least_0_9=round(float(hits[high].mean()), 4) if high.any() else None,
            low_confidence_share=round(float((p < 0.5).mean()), 4),
            right_among_low_confidence=round(float(hits[p < 0.5].mean()), 4),
        )
    return row


def tie_gaps(found: dict) -> list[dict]:
    """By the gap between the top two probabilities: how often the top group is right, and
    the runner-up, on the same titles (paired)."""
    gap = found["p1"] - found["p2"]
    rows = []
    for low, high in ((0, 0.01), (0.01, 0.02), (0.02, 0.03), (0.03, 0.05), (0.05, 0.08),
                      (0.08, 0.12), (0.12, 1.01)):  # fmt: skip
        inside = (gap >= low) & (gap < high)
        if inside.sum() < 20:
            continue
        top, second = found["top_right"][inside], found["second_right"][inside]
        versus = paired(top, second)
        rows.append({
            "gap": [low, high], "titles": int(inside.sum()),
            "top_right": round(float(top.mean()), 4),
            "runner_up_right": round(float(second.mean()), 4),
            "difference_ci95": versus["ci95"], "mcnemar_p": versus["mcnemar_p"],
        })  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--verdicts", default="500,2000")
    parser.add_argument("--write", action="store_true", help="store the starter for the product")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    counts = [int(x) for x in args.verdicts.split(",") if x]
    sets = {name: candidate_sets(name, args.data, counts) for name in TAXONOMIES}
    prior = hand_prior()

    starters, fit_seconds = {}, {}
    consistent = {name: consistent_examples(name, args.data, sets[name]) for name in TAXONOMIES}
    for fitted_on in (("esco", "onet"), ("esco",), ("onet",)):
        started = time.perf_counter()
        starters[fitted_on] = fit_starter(sets, consistent, fitted_on)
        fit_seconds["+".join(fitted_on)] = round(time.perf_counter() - started, 1)
    shipped = starters[("esco", "onet")]
    linear = fit_starter(sets, consistent, ("esco", "onet"), residual=False)

    report: dict = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "feature_set": FEATURE_SET,
        "fit_seconds": fit_seconds,
        "taxonomies": {},
    }
    for name in TAXONOMIES:
        other = next(n for n in TAXONOMIES if n != name)
        data = sets[name]
        labels = data["dev_labels"]
        base = answers(prior, data["dev_cold"], labels)
        rows = [{"name": "hand prior (before)", **summary(base)}]
        hits_of = {}
        found_linear = answers(linear, data["dev_cold"], labels)
        for key, label in (
            (("esco", "onet"), "starter fitted on both taxonomies' titles (ships)"),
            ((name,), f"starter fitted on {name}'s titles alone"),
            ((other,), f"starter fitted on {other}'s titles alone (transfer)"),
        ):
            found = answers(starters[key], data["dev_cold"], labels)
            hits_of[label] = found
            versus = paired(found["top_right"], base["top_right"])
            rows.append({"name": label, **summary(found), "against_prior": versus})
            if key == ("esco", "onet"):
                rows.append({
                    "name": "the same without its residual network",
                    **summary(found_linear),
                    "against_prior": paired(found_linear["top_right"], base["top_right"]),
                    "residual_against_without": paired(
                        found["top_right"], found_linear["top_right"]
                    ),
                })  # fmt: skip
        takeover = []
        for count in counts:
            warm = data["warm"][count]
            examples = [
                RankingExample(c, int(g))
                for c, g in zip(warm, data["stream_labels"][: len(warm)], strict=True)
            ]
            served = data["dev_served"][count]
            before = answers(fit_ranker(examples, prior=prior), served, labels)
            alone = answers(shipped, served, labels)
            after = answers(fit_ranker(examples, prior=shipped), served, labels)
            after_linear = answers(fit_ranker(examples, prior=linear), served, labels)
            takeover.append({
                "verdicts": count,
                "fit_from_hand_prior": summary(before),
                "starter_alone_with_the_verdicts_as_members": summary(alone),
                "fit_from_starter": summary(after),
                "fit_from_starter_against_hand_prior":
                    paired(after["top_right"], before["top_right"]),
                "fit_from_starter_against_starter_alone":
                    paired(after["top_right"], alone["top_right"]),
                "fit_from_starter_without_residual": summary(after_linear),
                "fit_from_starter_against_without_residual":
                    paired(after["top_right"], after_linear["top_right"]),
            })  # fmt: skip
        report["taxonomies"][name] = {
            "dev_titles": len(labels),
            "cold": rows,
            "takeover": takeover,
            "tie_gaps": tie_gaps(hits_of["starter fitted on both taxonomies' titles (ships)"]),
        }

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    for name, section in report["taxonomies"].items():
        print(f"\n{name}: {section['dev_titles']} dev-unseen titles, before any verdict")
        print(f"{'':58}{'acc@1':>7}{'ECE':>7}{'p>=.9':>7}{'right':>7}{'max p':>7}  acc@1 vs prior")
        for row in section["cold"]:
            versus = row.get("against_prior")
            text = "reference"
            if versus:
                low, high = versus["ci95"]
                text = f"{versus['difference']:+.3f} [{low:+.3f}, {high:+.3f}]"
            cells = [row.get(k) for k in ("ece", "share_at_least_0_9", "right_among_at_least_0_9",
                                          "max_probability")]  # fmt: skip
            shown = "".join(f"{c:7.3f}" if isinstance(c, float) else f"{'-':>7}" for c in cells)
            print(f"{row['name'][:57]:58}{row['acc@1']:7.3f}{shown}  {text}")
            if "residual_against_without" in row:
                gain = row["residual_against_without"]
                print(f"{'  the residual network, paired':58}{gain['difference']:+7.3f} "
                      f"[{gain['ci95'][0]:+.3f}, {gain['ci95'][1]:+.3f}]")  # fmt: skip
        for row in section["takeover"]:
            versus = row["fit_from_starter_against_hand_prior"]
            before, after = row["fit_from_hand_prior"], row["fit_from_starter"]
            alone = row["starter_alone_with_the_verdicts_as_members"]
            print(
                f"  after {row['verdicts']} verdicts: fit from the hand prior "
                f"{before['acc@1']:.3f} (ECE {before['ece']:.3f}), starter alone "
                f"{alone['acc@1']:.3f} (ECE {alone['ece']:.3f}), fit from the starter "
                f"{after['acc@1']:.3f} (ECE {after['ece']:.3f}; {versus['difference']:+.3f} "
                f"[{versus['ci95'][0]:+.3f}, {versus['ci95'][1]:+.3f}])"
            )
            gain = row["fit_from_starter_against_without_residual"]
            print(
                f"    its residual network, paired: {gain['difference']:+.3f} "
                f"[{gain['ci95'][0]:+.3f}, {gain['ci95'][1]:+.3f}]"
            )
        print("  tie gaps (top two probabilities): gap, titles, top right, runner-up right, 95% CI")
        for row in section["tie_gaps"]:
            print(f"    {row['gap']}: {row['titles']:5} {row['top_right']:.3f} "
                  f"{row['runner_up_right']:.3f} {row['difference_ci95']}")  # fmt: skip
    print(f"fits: {fit_seconds} s; wrote {args.out}")
    if args.write:
        shipped.metrics = {
            "fitted_on": "JobBERT vacancy titles of the curator stream (bench/jobbert_data.py), "
            "against ESCO (the title tower) and O*NET 27.0 through Nesta's crosswalk (the "
            "shipped student); cold and warm examples; the probability calibrated on the "
            "stream's consistently labelled titles; no title is stored",
            "calibrated_on": sum(len(cold) + len(warm) for cold, warm in consistent.values()),
            # What the product vouches with before a taxonomy's own verdicts: the shipped
            # starter's top answers on the consistently labelled titles (cold), numbers only.
            # Its 29 linear weights saw them among 30,000 examples, its residual network never;
            # bench/vouching.py measures the precision the threshold it gives holds on titles
            # nobody saw.
            "evidence": top_answer_evidence(
                shipped,
                [
                    (
                        shipped.scores(e.candidates.features),
                        e.target,
                        float(e.candidates.similarity.max()),
                    )
                    for name in TAXONOMIES
                    for e in consistent[name][0]
                    if len(e.candidates)
                ],
            ),
            "examples": shipped.fitted_on,
            "dev_unseen": {n: s["cold"][1] for n, s in report["taxonomies"].items()},
        }
        STARTER_FILE.write_text(json.dumps(shipped.as_dict(), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {STARTER_FILE}")


if __name__ == "__main__":
    main()
