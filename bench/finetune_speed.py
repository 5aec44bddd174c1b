"""Fine-tune throughput: training steps a second, and members encoded a second, on O*NET.

A fine-tune runs on a time budget (``SIAMWEB_FINETUNE_MAX_MINUTES``), so every step it loses to
overhead is a step of curator feedback not learnt: the corrigibility benchmark's round learnt
0.916 of its corrections in 779 steps and 0.948 in 1,293 (docs/benchmarks.md). This measures
the loop alone, on the corrigibility benchmark's encoder and training settings with the
fine-tune's overrides (replay, augmented curator inputs, blend), from a parent of the same
architecture:

- *steps/s*: training steps between the 20th and the last, so the sampler's set-up (synonym
  induction) and the first encoding are left out; each step draws a batch, embeds it, and
  updates the weights;
- *set-up*: seconds from the call to the 20th step;
- *encode*: every O*NET member encoded by the parent (inference, as the index build and the
  gate do it).

    .venv/bin/python bench/finetune_speed.py [--steps 300] [--repeat 3]

Prints a table and writes bench/results/finetune_speed.json. About 5 minutes on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench._pg import load_average, machine, print_table, write_results  # noqa: E402
from bench.corrigibility_training import ENCODER, TRAINING  # noqa: E402  (its starting model's recipe)
from bench.onet_data import onet_members, simulated_feedback  # noqa: E402
from models_app.siamese.encoders import encoder_class, parse_config  # noqa: E402
from models_app.siamese.networks import ngram_bag  # noqa: E402
from models_app.siamese.sampling import prepare_data  # noqa: E402
from models_app.siamese.specs import TrainConfig  # noqa: E402
from models_app.siamese.train import train_encoder  # noqa: E402

# As models_app.training.finetune_recipe.finetune_spec sets them (the engine may not import Django).
FINETUNE = {
    "replay_share": 0.5,
    "feedback_augment_share": 1.0,
    "keep_parent_share": 0.25,
    "select_best": False,
    "feedback_margin": 0.05,
}
TIMED_FROM_STEP = 20  # the loop reports progress every 20 steps


def clear_kept_ngram_ids() -> None:
    # Absent in a checkout from before the ids were kept (to measure it with this script).
    kept = getattr(ngram_bag, "training_ngram_bag_ids", None)
    if kept is not None:
        kept.cache_clear()


def one_fine_tune(data, parent, steps: int) -> dict[str, float]:
    marks: dict[int, float] = {}
    started = time.perf_counter()

    def progress(stage: str, fraction: float, eta: float | None) -> None:
        if stage == "train":
            marks[round(fraction * steps)] = time.perf_counter()

    config = TrainConfig(
        **{**TRAINING, **FINETUNE, "max_steps": steps, "eval_every": 10 * steps, "max_minutes": 60}
    )
    result = train_encoder(data, ENCODER, config, parent=parent, progress=progress)
    last = max(marks)
    return {
        "steps": result.steps,
        "setup_seconds": marks[TIMED_FROM_STEP] - started,
        "steps_per_second": (last - TIMED_FROM_STEP) / (marks[last] - marks[TIMED_FROM_STEP]),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.steps < 2 * TIMED_FROM_STEP:
        parser.error(f"--steps must be at least {2 * TIMED_FROM_STEP}")
    load_before = load_average()
    members, _ = onet_members()
    feedback, _ = simulated_feedback(members)
    texts = [text for _, text in members]
    parsed = parse_config(ENCODER)
    torch.manual_seed(0)
    parent = encoder_class(parsed.kind).create(texts, parsed).eval()
    data = prepare_data(members, feedback, config=TrainConfig(**TRAINING))

    runs, encodes = [], []
    for _ in range(args.repeat):
        started = time.perf_counter()
        parent.encode(texts)
        encodes.append({"per_second": len(texts) / (time.perf_counter() - started)})
        clear_kept_ngram_ids()
        runs.append(one_fine_tune(data, parent, args.steps))

    def median(rows, key):
        return statistics.median(row[key] for row in rows)

    row = {
        "members": len(texts),
        "feedback": len(feedback),
        "steps/s": median(runs, "steps_per_second"),
        "set-up s": median(runs, "setup_seconds"),
        "encode /s": median(encodes, "per_second"),
    }
    print_table([row], list(row))
    write_results(
        "finetune_speed",
        {
            "machine": machine(),
            "load_average_before": load_before,
            "load_average_after": load_average(),
            "command": " ".join(sys.argv),
            "torch_threads": torch.get_num_threads(),
            "encoder": ENCODER,
            "training": {**TRAINING, **FINETUNE, "max_steps": args.steps},
            "summary": row,
            "runs": runs,
            "encodes": encodes,
        },
    )


if __name__ == "__main__":
    main()
