"""Train the pretrained tower on a taxonomy and measure it on real inputs; CPU or GPU.

For each taxonomy and recipe: the engine's own ``train_encoder`` fine-tunes all-MiniLM-L6-v2
(``transformer`` encoder kind) on the taxonomy's member strings alone, then the tower is
measured by its embedding alone (exact nearest member, a group scoring as its best member):

- ESCO: JobBERT's dev-unseen vacancy titles (bench/jobbert_data.py), acc@1, R@5 and MRR;
- O*NET: the four Table-3 tests of Neculoiu et al. (bench/accuracy.py builds the same suite).

The search here is exact and in torch, so the script needs no FAISS and runs on a GPU machine
that carries only torch and sentence-transformers (bench/device/README.md).

    .venv/bin/python bench/tower_training.py --minutes 45 --taxonomies esco
    python3 bench/tower_training.py --device cuda --minutes 3 --recipes default,scale20

Prints a table and writes bench/results/tower_training.json (``--out`` to change it).
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
import torch  # noqa: E402

from bench.jobbert_data import SHARED_DATA, esco_members, jobbert_split  # noqa: E402
from bench.onet_data import onet_members, simulated_feedback  # noqa: E402
from models_app.siamese.evaluation import build_test_suite, evaluate  # noqa: E402
from models_app.siamese.sampling import prepare_data  # noqa: E402
from models_app.siamese.specs import TOWER_SPEC, TrainConfig  # noqa: E402
from models_app.siamese.towers import (  # noqa: E402
    BUNDLED_BASE,
    TransformerConfig,
    TransformerEncoder,
)
from models_app.siamese.train import train_encoder  # noqa: E402

# Each recipe is a set of training options over the product's tower spec (TOWER_SPEC), which
# caps training at 1,500 steps; "default" trains for the whole time budget instead.
TOWER_TRAINING = {
    key: value for key, value in TOWER_SPEC["training"].items() if key != "max_minutes"
}
RECIPES: dict[str, dict] = {
    "default": {"max_steps": 1_000_000},
    "batch256": {"max_steps": 1_000_000, "batch_size": 256},
    "scale10": {"max_steps": 1_000_000, "loss_params": {"scale": 10.0}},
    "lr1e-4": {"max_steps": 1_000_000, "learning_rate": 1e-4},
    "no_augment": {
        "max_steps": 1_000_000, "typo_share": 0.0, "synonym_share": 0.0, "extra_words_share": 0.0,
    },
    # The product's spec as it is: what `manage.py train --spec tower` runs.
    "steps1500": {},
}  # fmt: skip


class ExactMatcher:
    """Nearest members by cosine on the encoder's device; a group scores as its best member."""

    def __init__(self, encoder, texts, labels, *, oversample: int = 20) -> None:
        self.encoder, self.oversample = encoder, oversample
        self.device = encoder.device
        self.members = torch.from_numpy(encoder.encode(list(texts))).to(self.device)
        self.labels = np.asarray(labels)

    def rank(self, queries, k):
        vectors = torch.from_numpy(self.encoder.encode(list(queries))).to(self.device)
        depth = min(len(self.labels), k * self.oversample)
        out = []
        for start in range(0, len(vectors), 1024):
            scores = vectors[start : start + 1024] @ self.members.T
            top = scores.topk(depth, dim=1).indices.cpu().numpy()
            for row in top:
                ranked = list(dict.fromkeys(self.labels[row].tolist()))
                out.append(ranked[:k])
        return out


def real_metrics(matcher, cases) -> dict[str, float]:
    ranked = matcher.rank([text for text, _ in cases], 10)
    positions = [
        (row.index(target) + 1 if target in row else None)
        for row, (_, target) in zip(ranked, cases, strict=True)
    ]
    n = len(cases)
    return {
        "acc@1": sum(p == 1 for p in positions) / n,
        "r@5": sum(p is not None and p <= 5 for p in positions) / n,
        "mrr": sum(1 / p for p in positions if p is not None) / n,
        "n": n,
    }


def measure(taxonomy, encoder, members, extra) -> dict[str, float]:
    texts, labels = [t for _, t in members], [g for g, _ in members]
    matcher = ExactMatcher(encoder, texts, labels)
    if taxonomy == "esco":
        return real_metrics(matcher, extra)
    metrics = evaluate(matcher, extra)
    sets = ("typos", "composition", "extra_words", "verdicts")
    return {
        **{s: metrics[f"{s}/accuracy"] for s in sets},
        "mrr": float(np.mean([metrics[f"{s}/mrr"] for s in sets])),
    }


def load_taxonomy(name: str, data: Path):
    if name == "esco":
        members, _, ids = esco_members(data)
        dev, _ = jobbert_split(data)
        return members, [(row.text, ids[row.code]) for row in dev]
    members, _ = onet_members()
    _, annotations = simulated_feedback(members)
    return members, build_test_suite(members, seed=0, size=1000, verdicts=annotations)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--taxonomies", default="esco,onet")
    parser.add_argument("--recipes", default="default", help=f"of {', '.join(RECIPES)}")
    parser.add_argument("--minutes", type=float, default=45.0, help="training budget a model")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--base", default=BUNDLED_BASE, help="a local sentence-transformers folder")
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--save", type=Path, help="folder to store each trained tower in")
    parser.add_argument("--zero-shot", action="store_true", help="also measure the base as is")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/tower_training.json")
    args = parser.parse_args()
    recipes = args.recipes.split(",")
    unknown = sorted(set(recipes) - set(RECIPES))
    if unknown:
        parser.error(f"unknown recipe(s) {unknown}; choose from {sorted(RECIPES)}")
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = True
    device_name = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {device_name}"
    encoder_config = {"kind": "transformer", "base": args.base}
    rows = []
    for taxonomy in args.taxonomies.split(","):
        members, extra = load_taxonomy(taxonomy, args.data)
        if args.zero_shot:
            base = TransformerEncoder.create([], TransformerConfig(**encoder_config))
            if args.device != "cpu" and torch.cuda.is_available():
                base.to("cuda")
            rows.append({"taxonomy": taxonomy, "recipe": "zero-shot", "steps": 0,
                         **measure(taxonomy, base, members, extra)})  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
        for recipe in recipes:
            options = {**TOWER_TRAINING, **RECIPES[recipe]}
            config = TrainConfig(**options, max_minutes=args.minutes, device=args.device)
            data = prepare_data(members, config=config)
            result = train_encoder(data, encoder_config, config)
            encoder = result.encoder
            if result.device == "cuda":
                encoder.to("cuda")
            started = time.perf_counter()
            metrics = measure(taxonomy, encoder, members, extra)
            rows.append({
                "taxonomy": taxonomy, "recipe": recipe, "options": options,
                "device": result.device, "steps": result.steps,
                "train_seconds": round(result.seconds, 1),
                "steps_per_second": round(result.steps / result.seconds, 2),
                "pairs_per_second": round(result.steps * config.batch_size / result.seconds, 1),
                "stopped_because": result.stopped_because,
                "validation_accuracy": result.metrics["validation_accuracy"],
                "measure_seconds": round(time.perf_counter() - started, 1),
                **metrics,
            })  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
            if args.save:
                encoder.to("cpu")
                folder = args.save / f"{taxonomy}-{recipe}"
                folder.mkdir(parents=True, exist_ok=True)
                encoder.save(folder)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({"machine": machine, "rows": rows}, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": machine, "rows": rows}, indent=2))
    print(f"\nmachine: {machine}")
    print(f"{'taxonomy':9}{'recipe':12}{'steps':>7}{'steps/s':>9}  metrics")
    for r in rows:
        shown = {k: round(v, 3) for k, v in r.items()
                 if k in ("acc@1", "r@5", "mrr", "typos", "composition", "extra_words",
                          "verdicts")}  # fmt: skip
        print(f"{r['taxonomy']:9}{r['recipe']:12}{r['steps']:>7}"
              f"{r.get('steps_per_second', 0):>9}  {shown}")  # fmt: skip
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
