"""Do curators' corrections lift inputs nobody judged? Never-seen titles against a hindsight model.

GitHub issue #5 asks for accuracy on never-seen inputs to rise round over round.
``bench/corrigibility_onet.py``'s never-seen inputs are held-out O*NET alternate titles in job-ad
noise that no curator judges, so their titles are other ones than the corrected inputs'. This
script leaves the product and its fine-tune out and gives the corrections every advantage, on
the same data (seed 13: 4 x 500 corrected inputs, the *pool*, and 1,000 never-seen):

- *memory*: the first 500, 1,000 and 2,000 corrected inputs added as members of their gold
  groups (what a verdict's curator member is): every verdict recalled perfectly. The same with
  the pool's clean titles as members;
- *hindsight*: a model of the starting recipe trained with the pool's titles in its training
  strings from the first step (as alternate titles of their occupations), against the same
  recipe without them: same seed, same steps, same training and validation split of the
  taxonomy's own strings.

Per model, over the taxonomy's members (*taxonomy*), then with the pool titles or the corrected
inputs as members too:

- *never-seen*, served (the product's search, embedding plus trigram term); over the taxonomy
  also by the embedding alone, and the never-seen titles written clean (no job-ad words, no
  typo);
- *variants*: a fresh variant of each pool title (new job-ad words, as
  ``bench/corrigibility_onet.py`` makes them), served;
- *corrected by the weights*: the pool's inputs over the taxonomy's members only: did the model
  learn the corrections?

The recipe is ``bench/corrigibility_onet.py``'s starting model's, stopped after ``--steps``
instead of a clock and without best-checkpoint selection, and every model is stored and loaded as
the product stores it (float16 weights) before it is measured.

    .venv/bin/python bench/never_seen_hindsight.py [--steps 3400] [--seeds 0,1]
        [--out bench/results/never_seen_hindsight.json]

Prints a table and writes the JSON. About 10 minutes a model on 2 CPU cores (two per seed).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import corrigibility_onet as corrigibility  # noqa: E402
from bench._pg import machine  # noqa: E402
from bench.finetune_drift import (  # noqa: E402
    ROUND_SIZE,
    Taxonomy,
    benchmark_data,
    matcher,
    parse_seeds,
    right_share,
    write_results,
)
from models_app.siamese.encoders import load_encoder  # noqa: E402
from models_app.siamese.sampling import prepare_data  # noqa: E402
from models_app.siamese.search import SearchConfig  # noqa: E402
from models_app.siamese.specs import TrainConfig  # noqa: E402
from models_app.siamese.train import train_encoder  # noqa: E402

ROUNDS = 4
MEMORY_SIZES = (500, 1000, 2000)
OUT = ROOT / "bench" / "results" / "never_seen_hindsight.json"

Cases = list[tuple[str, int]]  # (query, gold group)


def with_titles(data, titles: list[tuple[int, str]]):
    """``data`` with ``titles`` added to its training strings, its validation split unchanged."""
    by_group = {group: list(texts) for group, texts in data.by_group.items()}
    for group, text in titles:
        by_group.setdefault(group, []).append(text)
    return dataclasses.replace(data, train=data.train + titles, by_group=by_group)


def train(data, *, config: TrainConfig):
    started = time.perf_counter()
    result = train_encoder(data, corrigibility.ENCODER, config)
    seconds = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as folder:
        result.encoder.save(Path(folder))
        return load_encoder(Path(folder)), result.steps, seconds  # as the product loads it


def measure(encoder, taxonomy: Taxonomy, cases: dict[str, Cases], pool_titles) -> dict:
    members = taxonomy.members
    corrected = cases["corrected"]
    served = matcher(encoder, members)
    row = {
        "never_seen": right_share(served, cases["never_seen"]),
        "never_seen_embedding_alone": right_share(
            matcher(encoder, members, SearchConfig(lexical_weight=0.0)), cases["never_seen"]
        ),
        "never_seen_titles": right_share(served, cases["never_seen_titles"]),
        "variants": right_share(served, cases["variants"]),
        "corrected_weights_alone": right_share(served, corrected),
    }
    with_pool_titles = matcher(encoder, members + pool_titles)
    row["never_seen_with_pool_titles"] = right_share(with_pool_titles, cases["never_seen"])
    row["variants_with_pool_titles"] = right_share(with_pool_titles, cases["variants"])
    for size in MEMORY_SIZES:
        found = matcher(encoder, members + [(group, text) for text, group in corrected[:size]])
        row[f"never_seen_with_{size}_inputs"] = right_share(found, cases["never_seen"])
        if size == len(corrected):
            row["variants_with_every_input"] = right_share(found, cases["variants"])
    return row


COLUMNS = (
    ("never_seen", "never-seen"),
    ("never_seen_embedding_alone", "emb. alone"),
    ("never_seen_titles", "clean titles"),
    ("never_seen_with_pool_titles", "+ titles"),
    *((f"never_seen_with_{size}_inputs", f"+ {size} inputs") for size in MEMORY_SIZES),
    ("variants", "variants"),
    ("variants_with_pool_titles", "+ titles"),
    ("variants_with_every_input", "+ inputs"),
    ("corrected_weights_alone", "corrected"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3400, help="training steps of every model")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    seeds = parse_seeds(parser, args.seeds)

    examples, taxonomy = benchmark_data(ROUNDS)
    gold = taxonomy.group_of_code
    pool, never = examples[: ROUNDS * ROUND_SIZE], examples[ROUNDS * ROUND_SIZE :]
    cases = {
        "corrected": [(e.text, gold[e.code]) for e in pool],
        "never_seen": [(e.text, gold[e.code]) for e in never],
        "never_seen_titles": [(e.title, gold[e.code]) for e in never],
        "variants": [
            (e.text, gold[e.code])
            for e in corrigibility.realistic_variants(pool, avoid=examples, seed=14)
        ],
    }
    pool_titles = [(gold[e.code], e.title) for e in pool]

    rows = []
    for seed in seeds:
        config = TrainConfig(
            **{
                **corrigibility.TRAINING,
                "max_steps": args.steps,
                "max_minutes": 600.0,  # the steps stop it, so that both arms train alike
                "select_best": False,
                "seed": seed,
            }
        )
        start_data = prepare_data(taxonomy.members, config=config, related=taxonomy.related)
        for arm, data in (
            ("start", start_data),
            ("hindsight", with_titles(start_data, pool_titles)),
        ):
            encoder, steps, seconds = train(data, config=config)
            row = {
                "model": arm,
                "seed": seed,
                "steps": steps,
                "train_seconds": round(seconds, 1),
                **measure(encoder, taxonomy, cases, pool_titles),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)

    print(f"{'model':<10} {'seed':>4} {'steps':>5} " + " ".join(f"{h:>12}" for _, h in COLUMNS))
    for row in rows:
        print(
            f"{row['model']:<10} {row['seed']:>4} {row['steps']:>5} "
            + " ".join(f"{row[key]:>12.3f}" for key, _ in COLUMNS)
        )
    write_results(
        args.out,
        {
            "machine": machine(),
            "command": " ".join(sys.argv),
            "sizes": {name: len(found) for name, found in cases.items()},
            "rows": rows,
        },
    )


if __name__ == "__main__":
    main()
