"""One round's fine-tune, offline: does a recipe learn the corrections without costing the suite?

GitHub issue #5. ``bench/corrigibility_onet.py`` runs the product end to end, about ten minutes a
round, and a fine-tune's drift on the frozen suite (about a point, the gate's tolerance) is
close to the run-to-run noise, so comparing recipes there takes hours. This script trains
only, on the same data, so that recipes can be compared over several seeds:

1. Data: the corrigibility benchmark's (``--rounds`` x 500 held-out O*NET alternate titles plus
   1,000 never-seen, made into realistic inputs with the same seed); the first round's 500 are
   the corrected inputs.
2. Starting model: the shipped recipe on the reduced taxonomy for ``--start-minutes``, trained
   once and cached in ``--cache`` (delete the folder to train it again).
3. Verdicts, as the benchmark's curators give them: the starting model's served answer over the
   taxonomy's members; confirm when it is the gold group (a positive pair with the member it
   matched), else reassign (a positive pair with the gold group's name, a negative one with
   the member of the wrong group it matched). Every judged input becomes a curator member of
   its gold group.
4. Per recipe and seed: a fine-tune from the starting model for ``--minutes`` with those
   verdicts (replay and no best-weights selection, as
   ``models_app.training.finetune_recipe.finetune_spec``
   sets them; one phase, no held-out fifth), then:

   - *Typos, Composition, Extra Words*: the gate's frozen suite (the taxonomy's titles, seed 0,
     1,000 cases a set), served search (embedding plus trigram term in its window) over every
     member, candidate minus starting model, in points;
   - *Extra Words, embedding alone*: the same set with no trigram term;
   - *corrected*: the corrected inputs right by the candidate's weights alone (searched over the
     taxonomy's members only, no curator member); *emb.*, the same with no trigram term;
   - *never-seen*: served over every member, candidate minus starting model, in points;
   - *spread*: mean cosine gap between the best and the 10th best member of a corrected input,
     starting model → candidate. The trigram window is a fixed cosine distance, so a wider
     spread leaves it fewer members to lift;
   - with ``--windows``: Typos, Extra Words and corrected again for each trigram window given,
     starting model and candidate;
   - with ``--blends``: every measure again for models whose weights are ``a`` x the
     candidate's plus ``1 - a`` x the starting model's, for each share ``a`` given (weight-space
     interpolation of a fine-tune with its parent, as WiSE-FT does): does a candidate that
     spends less of the gate's drift budget keep the corrections?

    .venv/bin/python bench/finetune_drift.py [--recipes verbatim,augmented] [--seeds 0,1]
        [--minutes 3] [--start-minutes 5] [--cache /tmp/siamweb-finetune-drift]
        [--windows 0.06,0.09] [--blends 0.5,0.75] [--out bench/results/finetune_drift.json]

Prints a table and writes bench/results/finetune_drift.json. About 5 minutes for the starting
model and 4 per recipe and seed on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench import corrigibility_onet as corrigibility  # noqa: E402
from models_app.siamese.encoders import load_encoder  # noqa: E402
from models_app.siamese.evaluation import build_test_suite, evaluate  # noqa: E402
from models_app.siamese.hybrid_matcher import HybridMatcher  # noqa: E402
from models_app.siamese.sampling import FeedbackExample, prepare_data  # noqa: E402
from models_app.siamese.search import SearchConfig  # noqa: E402
from models_app.siamese.specs import TrainConfig  # noqa: E402
from models_app.siamese.text import comparison_key  # noqa: E402
from models_app.siamese.train import blend_weights, train_encoder  # noqa: E402

ROUND_SIZE = 500
NEVER_SEEN = 1000
SUITE_SIZE = 1000
FROZEN = ("typos", "composition", "extra_words")
# What models_app.training.finetune_recipe.finetune_spec changes in the parent's training config
# (this script leaves Django and the product out).
FINETUNE = {"replay_share": 0.5, "select_best": False, "eval_every": 250}
RECIPES = {
    "verbatim": {"feedback_augment_share": 0.0},
    "augmented": {"feedback_augment_share": 1.0},  # the product's, before the blend and margin
    "augmented_more_feedback": {"feedback_augment_share": 1.0, "replay_share": 0.35},
    "lower_lr": {"feedback_augment_share": 0.0, "learning_rate": 3e-4},
    # models_app.training.retraining's fine-tune today: augmented curator inputs, a quarter of the
    # parent's weights kept, a cosine margin on curator inputs; and the same with twice the
    # margin, whose lead over a false match would clear the search's trigram window
    # (SearchConfig.lexical_window, 0.03) more often.
    "product": {"feedback_augment_share": 1.0, "keep_parent_share": 0.25, "feedback_margin": 0.05},
    "margin_0.10": {
        "feedback_augment_share": 1.0,
        "keep_parent_share": 0.25,
        "feedback_margin": 0.10,
    },
}
OUT = ROOT / "bench" / "results" / "finetune_drift.json"


class Taxonomy:
    """The reduced O*NET as (group id, text) members, with group names and relations."""

    def __init__(self, held_out: list[tuple[str, str]]) -> None:
        folder = corrigibility.reduced_onet(held_out)
        try:
            occupations = corrigibility._tab_rows(folder / corrigibility.OCCUPATIONS)
            alternates = corrigibility._tab_rows(folder / corrigibility.ALTERNATES)
            related = corrigibility._tab_rows(folder / corrigibility.RELATED)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        codes = sorted({row["O*NET-SOC Code"] for row in occupations})
        self.group_of_code = {code: i for i, code in enumerate(codes)}
        self.names = {
            self.group_of_code[row["O*NET-SOC Code"]]: row["Title"].strip() for row in occupations
        }
        self.members: list[tuple[int, str]] = []
        seen: set[tuple[int, str]] = set()
        rows = [(row["O*NET-SOC Code"], row["Title"]) for row in occupations] + [
            (row["O*NET-SOC Code"], row["Alternate Title"]) for row in alternates
        ]
        for code, text in rows:
            group = self.group_of_code[code]
            if (group, comparison_key(text)) not in seen:
                seen.add((group, comparison_key(text)))
                self.members.append((group, text.strip()))
        self.related = [
            (self.group_of_code[row["O*NET-SOC Code"]], self.group_of_code[code])
            for row in related
            if (code := row["Related O*NET-SOC Code"]) in self.group_of_code
        ]


def benchmark_data(rounds: int) -> tuple[list, Taxonomy]:
    """The corrigibility benchmark's realistic inputs (``rounds`` x 500 for the curators, then
    1,000 never-seen; seed 13, as its defaults) and the reduced taxonomy they were taken from."""
    held_out = corrigibility.held_out_titles(
        count=rounds * ROUND_SIZE + NEVER_SEEN, min_titles=5, seed=13
    )
    return corrigibility.realistic_examples(held_out, seed=13), Taxonomy(held_out)


def parse_seeds(parser: argparse.ArgumentParser, text: str) -> list[int]:
    try:
        seeds = [int(seed) for seed in text.split(",")]
    except ValueError:
        parser.error(f"--seeds must be integers separated by commas, got {text!r}")
    if len(set(seeds)) != len(seeds):
        parser.error(f"--seeds names a seed twice: {text!r}")
    return seeds


def matcher(encoder, members, config: SearchConfig | None = None) -> HybridMatcher:
    return HybridMatcher(
        encoder,
        [text for _, text in members],
        [group for group, _ in members],
        config=config or SearchConfig(),
    )


def verdicts(encoder, taxonomy: Taxonomy, examples) -> list[FeedbackExample]:
    """The benchmark's curators on the starting model's answers (see the module docstring)."""
    feedback = []
    found = matcher(encoder, taxonomy.members)
    texts = [text for _, text in taxonomy.members]
    ranked = found.rank_hits([e.text for e in examples], 1)
    for example, hits in zip(examples, ranked, strict=True):
        hit = hits[0] if hits else None
        gold = taxonomy.group_of_code[example.code]
        if hit is not None and hit.group_id == gold:
            feedback.append(FeedbackExample(example.text, gold, True, texts[hit.member_id]))
            continue
        feedback.append(FeedbackExample(example.text, gold, True, taxonomy.names[gold]))
        if hit is not None:
            feedback.append(
                FeedbackExample(example.text, hit.group_id, False, texts[hit.member_id])
            )
    return feedback


def right_share(found: HybridMatcher, cases: list[tuple[str, int]]) -> float:
    # k=1 as recorded: a deeper ranking may break exact score ties between groups otherwise.
    return evaluate(found, {"cases": cases}, k=1)["cases/accuracy"]


def spread(found: HybridMatcher, texts: list[str]) -> float:
    """Mean cosine gap between each text's best and 10th best member of ``found``'s index."""
    cosines = found.encoder.encode(texts) @ found.vectors.T
    top = -np.sort(-cosines, axis=1)[:, :10]
    return float((top[:, 0] - top[:, 9]).mean())


def scores(encoder, taxonomy: Taxonomy, everyone, suite, corrected, never_seen, windows=()) -> dict:
    # Each index encodes its members once and serves every measure made over it.
    served = matcher(encoder, everyone)
    taxonomy_only = matcher(encoder, taxonomy.members)
    on_suite = evaluate(served, suite)
    embedding = evaluate(
        matcher(encoder, everyone, SearchConfig(lexical_weight=0.0)),
        {"extra_words": suite["extra_words"]},
    )
    return {
        **{name: on_suite[f"{name}/accuracy"] for name in FROZEN},
        "extra_words_embedding": embedding["extra_words/accuracy"],
        "corrected": right_share(taxonomy_only, corrected),
        "corrected_embedding": right_share(
            matcher(encoder, taxonomy.members, SearchConfig(lexical_weight=0.0)), corrected
        ),
        "never_seen": right_share(served, never_seen),
        "spread": spread(taxonomy_only, [text for text, _ in corrected]),
        "windows": {window: window_scores(encoder, taxonomy, everyone, suite, corrected, window)
                    for window in windows},
    }  # fmt: skip


def window_scores(encoder, taxonomy, everyone, suite, corrected, window: float) -> dict:
    """Typos, Extra Words and corrections with the trigram term lifting members within
    ``window`` of the best cosine instead of the default."""
    config = SearchConfig(lexical_window=window)
    served = evaluate(
        matcher(encoder, everyone, config),
        {name: suite[name] for name in ("typos", "extra_words")},
    )
    return {
        "typos": served["typos/accuracy"],
        "extra_words": served["extra_words/accuracy"],
        "corrected": right_share(matcher(encoder, taxonomy.members, config), corrected),
    }


def blend(parent, candidate, share: float):
    """A copy of ``candidate`` whose every weight is ``share`` of its own plus ``1 - share`` of
    ``parent``'s (same architecture: a fine-tune of it), as the product blends a fine-tune."""
    blended = copy.deepcopy(candidate)
    blend_weights(blended, parent, keep=1 - share)
    return blended


def write_results(path: Path, results: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {path}")


def starting_model(taxonomy: Taxonomy, *, cache: Path, minutes: float):
    if (cache / "manifest.json").exists():
        print(f"starting model from {cache}")
        return load_encoder(cache)
    config = TrainConfig(**{**corrigibility.TRAINING, "max_minutes": minutes, "eval_every": 250})
    data = prepare_data(taxonomy.members, config=config, related=taxonomy.related)
    result = train_encoder(data, corrigibility.ENCODER, config)
    cache.mkdir(parents=True, exist_ok=True)
    result.encoder.save(cache)
    print(f"starting model: {result.steps} steps, stopped because {result.stopped_because}")
    return load_encoder(cache)  # as the product loads it: float16 weights


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipes", default="verbatim,augmented")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--start-minutes", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=4, help="as the corrigibility run's data")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/siamweb-finetune-drift"))
    parser.add_argument(
        "--windows", default="", help="trigram windows to score each model with, e.g. 0.06,0.09"
    )
    parser.add_argument(
        "--blends", default="", help="shares of the candidate's weights to blend, e.g. 0.5,0.75"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    recipes = args.recipes.split(",")
    unknown = sorted(set(recipes) - set(RECIPES))
    if unknown:
        parser.error(f"unknown recipe(s) {', '.join(unknown)}; choose from {', '.join(RECIPES)}")
    seeds = parse_seeds(parser, args.seeds)
    try:
        windows = [float(window) for window in args.windows.split(",") if window]
    except ValueError:
        parser.error(f"--windows must be numbers separated by commas, got {args.windows!r}")
    if any(not 0 <= window <= 2 for window in windows):
        parser.error("every window must be in [0, 2]")
    try:
        blends = [float(share) for share in args.blends.split(",") if share]
    except ValueError:
        parser.error(f"--blends must be numbers separated by commas, got {args.blends!r}")
    if any(not 0 < share < 1 for share in blends):
        parser.error("every blend share must be between 0 and 1 (exclusive)")

    examples, taxonomy = benchmark_data(args.rounds)
    round_one, never = examples[:ROUND_SIZE], examples[args.rounds * ROUND_SIZE :]
    gold = taxonomy.group_of_code
    corrected = [(e.text, gold[e.code]) for e in round_one]
    never_seen = [(e.text, gold[e.code]) for e in never]
    everyone = taxonomy.members + [(gold[e.code], e.text) for e in round_one]
    suite = build_test_suite(taxonomy.members, seed=0, size=SUITE_SIZE)
    del suite["verdicts"]

    parent = starting_model(taxonomy, cache=args.cache, minutes=args.start_minutes)
    feedback = verdicts(parent, taxonomy, round_one)
    before = scores(parent, taxonomy, everyone, suite, corrected, never_seen, windows)
    print("starting model:", json.dumps(before), flush=True)
    rows = []
    for recipe in recipes:
        for seed in seeds:
            config = TrainConfig(
                **{
                    **corrigibility.TRAINING,
                    **FINETUNE,
                    "max_minutes": args.minutes,
                    "seed": seed,
                    **RECIPES[recipe],
                }
            )
            data = prepare_data(everyone, feedback, config=config, related=taxonomy.related)
            started = time.perf_counter()
            result = train_encoder(data, corrigibility.ENCODER, config, parent=parent)
            seconds = time.perf_counter() - started
            after = scores(
                result.encoder, taxonomy, everyone, suite, corrected, never_seen, windows
            )
            blended = {
                share: scores(
                    blend(parent, result.encoder, share),
                    taxonomy, everyone, suite, corrected, never_seen,
                )
                for share in blends
            }  # fmt: skip
            row = {
                "recipe": recipe,
                "seed": seed,
                "steps": result.steps,
                "train_seconds": round(seconds, 1),
                **{f"{name}_delta_points": round(100 * (after[name] - before[name]), 1)
                   for name in (*FROZEN, "never_seen")},
                "extra_words_embedding": [before["extra_words_embedding"],
                                          after["extra_words_embedding"]],
                "corrected": after["corrected"],
                "corrected_embedding": after["corrected_embedding"],
                "spread": [round(before["spread"], 4), round(after["spread"], 4)],
                "windows": {window: {"before": before["windows"][window],
                                     "after": after["windows"][window]} for window in windows},
                "blends": {share: {**{f"{name}_delta_points":
                                      round(100 * (found[name] - before[name]), 1)
                                      for name in (*FROZEN, "never_seen")},
                                   "corrected": found["corrected"]}
                           for share, found in blended.items()},
            }  # fmt: skip
            rows.append(row)
            print(json.dumps(row), flush=True)

    header = (
        f"{'recipe':<25} {'seed':>4} {'steps':>5} {'Typos':>6} {'Comp':>6} {'Extra':>6} "
        f"{'Extra emb.':>13} {'corrected':>9} {'emb.':>6} {'never':>6} {'spread':>15}"
    )
    print(header)
    for row in rows:
        embedding = row["extra_words_embedding"]
        print(
            f"{row['recipe']:<25} {row['seed']:>4} {row['steps']:>5} "
            f"{row['typos_delta_points']:>+6.1f} {row['composition_delta_points']:>+6.1f} "
            f"{row['extra_words_delta_points']:>+6.1f} "
            f"{embedding[0]:>6.3f}→{embedding[1]:<6.3f} {row['corrected']:>9.3f} "
            f"{row['corrected_embedding']:>6.3f} "
            f"{row['never_seen_delta_points']:>+6.1f} "
            f"{row['spread'][0]:>7.4f}→{row['spread'][1]:<7.4f}"
        )
    for row in rows:
        for share, found in row["blends"].items():
            print(
                f"{row['recipe']} seed {row['seed']} blend {share}: "
                f"Typos {found['typos_delta_points']:+.1f} "
                f"Comp {found['composition_delta_points']:+.1f} "
                f"Extra {found['extra_words_delta_points']:+.1f} "
                f"corrected {found['corrected']:.3f} never {found['never_seen_delta_points']:+.1f}"
            )
    for row in rows:
        for window, measured in row["windows"].items():
            shown = {
                name: f"{measured['before'][name]:.3f}→{measured['after'][name]:.3f}"
                for name in ("typos", "extra_words", "corrected")
            }
            print(f"{row['recipe']} seed {row['seed']} window {window}: {shown}")
    write_results(
        args.out,
        {
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}",
            "command": " ".join(sys.argv),
            "before": before,
            "rows": rows,
        },
    )


if __name__ == "__main__":
    main()
