"""How much can curators' corrections lift inputs nobody judged? A ceiling for never-seen accuracy.

GitHub issue #5 asks for accuracy on never-seen inputs to rise round over round.
``bench/corrigibility.py``'s never-seen inputs are held-out O*NET alternate titles in job-ad
noise that no curator judges, so their titles are other ones than the corrected inputs'. This
script leaves the product and the fine-tune out and measures what the corrections could buy
those inputs at best, on the same data (seed 13: 4 x 500 corrected inputs, the *pool*, and
1,000 never-seen):

- *memory*: the first 500, 1,000 and 2,000 corrected inputs added as members of their gold
  groups (what a verdict's curator member is), served by the starting model: every verdict
  recalled perfectly. The same for the pool's clean titles;
- *hindsight*: the starting recipe trained from scratch with the pool's titles in the taxonomy
  (as alternate titles of their occupations) for as many steps as without them, per seed: a
  model that learnt every correction before it was made, served over the taxonomy with those
  titles;
- per model, the never-seen titles without their job-ad words and typos, and *variants* (fresh
  job-ad words around each corrected title, as ``bench/corrigibility.py`` makes them) with the
  corrected inputs as members.

Every search is the product's (embedding plus trigram term, ``SearchConfig()``) over an exact
index; the training recipe is ``bench/corrigibility.py``'s starting model's, stopped after
``--steps`` instead of a clock and without best-checkpoint selection, so that both arms of a
seed train alike.

    .venv/bin/python bench/never_seen_ceiling.py [--steps 2500] [--seeds 0,1]
        [--out bench/results/never_seen_ceiling.json]

Prints a table and writes the JSON. About 6 minutes a model on 2 CPU cores (two per seed).
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

from bench import corrigibility  # noqa: E402
from bench.finetune_drift import Taxonomy, matcher, right_share  # noqa: E402
from models_app.siamese.search import SearchConfig  # noqa: E402
from models_app.siamese.train import TrainConfig, prepare_data, train_encoder  # noqa: E402

ROUNDS, ROUND_SIZE, NEVER_SEEN = 4, 500, 1000
MEMORY_SIZES = (0, 500, 1000, 2000)
OUT = ROOT / "bench" / "results" / "never_seen_ceiling.json"


def train(taxonomy: Taxonomy, members: list[tuple[int, str]], *, steps: int, seed: int):
    config = TrainConfig(
        **{
            **corrigibility.TRAINING,
            "max_steps": steps,
            "max_minutes": 600.0,  # the steps stop it, so that both arms train alike
            "select_best": False,
            "seed": seed,
        }
    )
    data = prepare_data(members, config=config, related=taxonomy.related)
    started = time.perf_counter()
    result = train_encoder(data, corrigibility.ENCODER, config)
    return result, time.perf_counter() - started


def measure(encoder, members, pool, never_seen, never_seen_titles, variants) -> dict:
    """Never-seen accuracy served over ``members`` plus the first k corrected inputs, for each
    k of MEMORY_SIZES; the clean never-seen titles and the variants."""
    row = {}
    for size in MEMORY_SIZES:
        found = matcher(encoder, members + [(group, text) for text, group in pool[:size]])
        row[f"never_seen_with_{size}"] = right_share(found, never_seen)
        if size == MEMORY_SIZES[0]:
            row["never_seen_titles"] = right_share(found, never_seen_titles)
            row["never_seen_embedding_alone"] = right_share(
                matcher(encoder, members, SearchConfig(lexical_weight=0.0)), never_seen
            )
        if size == MEMORY_SIZES[-1]:
            row["variants_with_every_input"] = right_share(found, variants)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2500, help="training steps of every model")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    try:
        seeds = [int(seed) for seed in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds must be integers separated by commas, got {args.seeds!r}")

    held_out = corrigibility.held_out_titles(
        count=ROUNDS * ROUND_SIZE + NEVER_SEEN, min_titles=5, seed=13
    )
    examples = corrigibility.realistic_examples(held_out, seed=13)
    taxonomy = Taxonomy(held_out)
    gold = taxonomy.group_of_code
    pool, never = examples[: ROUNDS * ROUND_SIZE], examples[ROUNDS * ROUND_SIZE :]
    corrected = [(e.text, gold[e.code]) for e in pool]
    never_seen = [(e.text, gold[e.code]) for e in never]
    never_seen_titles = [(e.title, gold[e.code]) for e in never]
    variants = [
        (e.text, gold[e.code])
        for e in corrigibility.realistic_variants(pool, avoid=examples, seed=14)
    ]
    pool_titles = [(gold[e.code], e.title) for e in pool]

    rows = []
    for seed in seeds:
        for arm, members in (
            ("start", taxonomy.members),
            ("hindsight", taxonomy.members + pool_titles),
        ):
            result, seconds = train(taxonomy, members, steps=args.steps, seed=seed)
            row = {
                "model": arm,
                "seed": seed,
                "steps": result.steps,
                "train_seconds": round(seconds, 1),
                # The hindsight model is served over the titles it was trained with; the
                # starting model over the taxonomy alone, and with the titles as memory.
                **measure(
                    result.encoder, members, corrected, never_seen, never_seen_titles, variants
                ),
            }
            if arm == "start":
                row["never_seen_with_pool_titles"] = right_share(
                    matcher(result.encoder, members + pool_titles), never_seen
                )
            rows.append(row)
            print(json.dumps(row), flush=True)

    memory = [f"never_seen_with_{size}" for size in MEMORY_SIZES]
    header = (
        f"{'model':<10} {'seed':>4} {'steps':>5} "
        + " ".join(f"{'+' + str(size) + ' inputs':>12}" for size in MEMORY_SIZES)
        + f" {'+ titles':>9} {'emb. alone':>10} {'clean titles':>12} {'variants':>9}"
    )
    print(header)
    for row in rows:
        titles = row.get("never_seen_with_pool_titles")
        print(
            f"{row['model']:<10} {row['seed']:>4} {row['steps']:>5} "
            + " ".join(f"{row[key]:>12.3f}" for key in memory)
            + f" {'' if titles is None else format(titles, '.3f'):>9}"
            f" {row['never_seen_embedding_alone']:>10.3f} {row['never_seen_titles']:>12.3f}"
            f" {row['variants_with_every_input']:>9.3f}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                f"Python {platform.python_version()}",
                "command": " ".join(sys.argv),
                "corrected_inputs": len(corrected),
                "never_seen_inputs": len(never_seen),
                "rows": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
