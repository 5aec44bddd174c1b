"""Accuracy on real inputs: JobBERT's dev-unseen vacancy titles matched to ESCO occupations.

Every matcher searches all ESCO labels (preferred and alternative); a title is a hit when its
top group is the occupation JobBERT gives it. No JobBERT title is in any training here. Rows:

- the paper's trigram baseline and TF-IDF character n-grams;
- all-MiniLM-L6-v2 as it comes: the pretrained tower a new taxonomy serves first;
- the tower trained on ESCO (``--tower`` names its folder; `bench/tower_training.py --save`
  or `manage.py train esco --spec tower` make one), alone as the product serves it
  (``TOWER_SPEC``'s search) and with the trigram term the n-gram models use;
- any other stored model (``--model NAME=FOLDER``), served with its own default search.

Each row has acc@1, R@5 and MRR, and its acc@1 against the pretrained tower's on the same titles
(paired: the difference with a 95% bootstrap interval and McNemar's exact p). Speed: batch encode
strings/s and one-title search latency (p50/p99) of each matcher, in this process.

    .venv/bin/python bench/real_accuracy.py --tower var/towers/esco-steps1500

Prints a table and writes bench/results/real_accuracy.json.
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

from bench.jobbert_data import SHARED_DATA, esco_members, jobbert_split  # noqa: E402
from models_app.siamese.baselines import EncoderMatcher, TrigramMatcher  # noqa: E402
from models_app.siamese.encoders import fit_encoder, load_encoder, parse_config  # noqa: E402
from models_app.siamese.hybrid_matcher import HybridMatcher  # noqa: E402
from models_app.siamese.search import SearchConfig  # noqa: E402
from models_app.siamese.specs import TOWER_SPEC, parse_search_config  # noqa: E402
from models_app.siamese.stats import binomial_tail  # noqa: E402
from models_app.siamese.towers import TransformerEncoder  # noqa: E402

OUT = ROOT / "bench" / "results" / "real_accuracy.json"
BOOTSTRAP_SAMPLES = 2000
LATENCY_QUERIES = 200


class CachedEncoder:
    """Encodes each distinct text once: several rows search with one encoder."""

    def __init__(self, encoder) -> None:
        self.encoder, self.dim, self._cache = encoder, encoder.dim, {}

    def encode(self, texts):
        texts = list(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            self._cache.update(zip(missing, self.encoder.encode(missing), strict=True))
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return np.stack([self._cache[t] for t in texts]).astype(np.float32)


def positions(matcher, cases) -> list[int | None]:
    ranked = matcher.rank([text for text, _ in cases], 10)
    return [
        (row.index(target) + 1 if target in row else None)
        for row, (_, target) in zip(ranked, cases, strict=True)
    ]


def paired(hits: np.ndarray, reference: np.ndarray, seed: int = 0) -> dict[str, float]:
    """acc@1 of ``hits`` minus ``reference`` on the same titles: a 95% bootstrap interval and
    McNemar's exact two-sided p on the discordant titles."""
    rng = np.random.default_rng(seed)
    n = len(hits)
    samples = rng.integers(0, n, size=(BOOTSTRAP_SAMPLES, n))
    differences = hits[samples].mean(axis=1) - reference[samples].mean(axis=1)
    only_this, only_reference = int((hits & ~reference).sum()), int((~hits & reference).sum())
    # Two-sided: twice the tail of the larger side (the binomial at 1/2 is symmetric).
    p = min(1.0, 2 * binomial_tail(max(only_this, only_reference), only_this + only_reference))
    low, high = np.percentile(differences, [2.5, 97.5])
    return {
        "difference": float(hits.mean() - reference.mean()),
        "ci95": [round(float(low), 4), round(float(high), 4)],
        "wins": only_this,
        "losses": only_reference,
        "mcnemar_p": p,
    }


def speed(matcher, encoder, titles: list[str]) -> dict[str, float]:
    started = time.perf_counter()
    encoder.encode(titles)
    per_second = len(titles) / (time.perf_counter() - started)
    latencies = []
    for title in titles[:LATENCY_QUERIES]:
        started = time.perf_counter()
        matcher.rank([title + " "], 5)  # a text the cache has not seen
        latencies.append((time.perf_counter() - started) * 1000)
    return {
        "encode_per_second": round(per_second, 1),
        "search_p50_ms": round(float(np.percentile(latencies, 50)), 2),
        "search_p99_ms": round(float(np.percentile(latencies, 99)), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--tower", type=Path, help="a tower trained on ESCO (a saved folder)")
    parser.add_argument("--model", action="append", default=[], metavar="NAME=FOLDER")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    extra = []
    for item in args.model:
        name, _, folder = item.partition("=")
        if not name or not folder:
            parser.error(f"--model takes NAME=FOLDER, got {item!r}")
        extra.append((name, Path(folder)))

    members, _, ids = esco_members(args.data)
    dev, _ = jobbert_split(args.data)
    cases = [(row.text, ids[row.code]) for row in dev]
    texts, labels = [t for _, t in members], [g for g, _ in members]
    titles = [text for text, _ in cases]
    rows, hits_of = [], {}

    def measure(name: str, matcher, encoder=None) -> None:
        started = time.perf_counter()
        found = positions(matcher, cases)
        n = len(found)
        hits = np.array([p == 1 for p in found])
        row = {
            "name": name,
            "acc@1": float(hits.mean()),
            "r@5": sum(p is not None and p <= 5 for p in found) / n,
            "mrr": sum(1 / p for p in found if p is not None) / n,
            "n": n,
            "seconds": round(time.perf_counter() - started, 1),
        }
        if encoder is not None:
            row.update(speed(matcher, encoder.encoder, titles[:2000]))
        hits_of[name] = hits
        rows.append(row)
        print(json.dumps(row), flush=True)

    measure("trigram baseline (paper)", TrigramMatcher(texts, labels))
    tfidf = CachedEncoder(fit_encoder(texts, {"kind": "char_ngram_tfidf"}))
    measure("TF-IDF char 2-4-grams (LSA 256)", EncoderMatcher(tfidf, texts, labels), tfidf)
    pretrained = CachedEncoder(TransformerEncoder.create([], parse_config({"kind": "transformer"})))
    reference = "all-MiniLM-L6-v2 as it comes (pretrained tower, a new taxonomy's model)"
    measure(reference, EncoderMatcher(pretrained, texts, labels), pretrained)
    if args.tower:
        tower = CachedEncoder(load_encoder(args.tower))
        served = parse_search_config(TOWER_SPEC)
        measure(
            "tower trained on ESCO, as served (TOWER_SPEC: embedding alone)",
            HybridMatcher(tower, texts, labels, config=served),
            tower,
        )
        measure(
            "tower trained on ESCO + trigram term (lexical 0.3, window 0.03)",
            HybridMatcher(tower, texts, labels, config=SearchConfig()),
        )
    for name, folder in extra:
        encoder = CachedEncoder(load_encoder(folder))
        spec_file = folder.parent / f"{folder.name}.spec.json"
        spec = json.loads(spec_file.read_text()) if spec_file.exists() else None
        search = parse_search_config(spec)
        measure(name, HybridMatcher(encoder, texts, labels, config=search), encoder)

    for row in rows:
        if row["name"] != reference:
            row["against_pretrained"] = paired(hits_of[row["name"]], hits_of[reference])
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "machine": machine,
                "data": "JobBERT validation titles, dev-unseen split (bench/jobbert_data.py)",
                "rows": rows,
            },
            indent=2,
        )
    )
    print(f"\nJobBERT dev-unseen -> ESCO, {len(cases)} titles; machine: {machine}")
    print(f"{'':66}{'acc@1':>7}{'R@5':>7}{'MRR':>7}  acc@1 vs pretrained (95% CI)   enc/s  p50 ms")
    for r in rows:
        against = r.get("against_pretrained")
        versus = (
            f"{against['difference']:+.3f} [{against['ci95'][0]:+.3f}, {against['ci95'][1]:+.3f}]"
            if against
            else "reference"
        )
        print(
            f"{r['name'][:65]:66}{r['acc@1']:7.3f}{r['r@5']:7.3f}{r['mrr']:7.3f}  {versus:28}"
            f"{r.get('encode_per_second', ''):>7}{r.get('search_p50_ms', ''):>8}"
        )
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()
