"""What a user sees before any verdict, with the title tower against without it, paired.

Both products serve the dev-unseen titles as a new taxonomy gets them, through the starter
ranker (``bench/ranker.py``'s ``Served``, the product's candidates and features):

- ESCO: the pretrained tower a new taxonomy serves (the wheel's MiniLM before, the title tower
  now), each with the starter ranker fitted for it;
- O*NET through the crosswalk: the shipped demo model (the n-gram model trained on O*NET's
  strings before, the title tower's student now), each with its starter.

The "before" side is read from git at ``--before`` (the commit this work started from): its
starter ranker file and its data/models/onet/. Per taxonomy: acc@1 and candidate recall (the
right group among the ranker's candidates), each difference paired on the same titles with a
95% bootstrap interval and McNemar's p.

    .venv/bin/python bench/title_tower_served.py [--before ac752c9] [--esco-before title]

Prints a table and writes bench/results/title_tower_served.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench.jobbert_data import SHARED_DATA  # noqa: E402
from bench.ranker import (  # noqa: E402
    CachedEncoder,
    Served,
    esco_taxonomy,
    onet_taxonomy,
    shipped_onet,
    title_tower_encoder,
    wheel_encoder,
)
from bench.real_accuracy import paired  # noqa: E402
from bench.starter_ranker import answers  # noqa: E402
from models_app.siamese.encoders import load_encoder  # noqa: E402
from models_app.siamese.ranker.files import STARTER_FILE  # noqa: E402
from models_app.siamese.ranker.model import PRIOR_DESCRIPTION_WEIGHT, LinearRanker  # noqa: E402
from models_app.siamese.search import SearchConfig  # noqa: E402
from models_app.siamese.specs import parse_search_config  # noqa: E402

OUT = ROOT / "bench" / "results" / "title_tower_served.json"


def git_file(commit: str, path: str) -> bytes:
    return subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{commit}:{path}"], capture_output=True, check=True
    ).stdout


def old_onet(commit: str, folder: Path) -> tuple[CachedEncoder, SearchConfig]:
    for name in ("manifest.json", "shipped.json", "vocabulary.json", "weights.pt"):
        (folder / name).write_bytes(git_file(commit, f"data/models/onet/{name}"))
    spec = json.loads((folder / "shipped.json").read_text()).get("spec", {})
    encoder = CachedEncoder(f"onet-shipped-{commit}", lambda: load_encoder(folder))
    return encoder, parse_search_config(spec)


def served(taxonomy, encoder, search, ranker: LinearRanker) -> dict:
    product = Served(taxonomy, encoder, search, PRIOR_DESCRIPTION_WEIGHT)
    texts = [t for t, _ in taxonomy.dev]
    labels = np.array([g for _, g in taxonomy.dev])
    candidates = product.candidates(texts, encoder.vectors(texts))
    found = answers(ranker, candidates, labels)
    found["recall"] = np.array(
        [
            bool(len(c)) and bool(np.any(c.groups == g))
            for c, g in zip(candidates, labels, strict=True)
        ]
    )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--before", default="ac752c9", help="the commit to compare against")
    parser.add_argument(
        "--esco-before",
        choices=("wheel", "title"),
        default="wheel",
        help="the tower ESCO's before side serves (title: the same tower, only the starter "
        "and O*NET's model differ)",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    esco_before = wheel_encoder() if args.esco_before == "wheel" else title_tower_encoder()
    before_starter = LinearRanker.from_dict(json.loads(git_file(args.before, str(
        STARTER_FILE.relative_to(ROOT)))))  # fmt: skip
    now_starter = LinearRanker.from_dict(json.loads(STARTER_FILE.read_text()))
    report: dict = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "before": args.before,
        "esco_before": args.esco_before,
        "taxonomies": {},
    }
    with tempfile.TemporaryDirectory() as scratch:
        setups = {
            "esco": (
                esco_taxonomy(args.data),
                (esco_before, SearchConfig(lexical_weight=0.0)),
                (title_tower_encoder(), SearchConfig(lexical_weight=0.0)),
            ),
            "onet": (
                onet_taxonomy(args.data),
                old_onet(args.before, Path(scratch)),
                shipped_onet(),
            ),
        }
        for name, (taxonomy, (old_encoder, old_search), (encoder, search)) in setups.items():
            before = served(taxonomy, old_encoder, old_search, before_starter)
            now = served(taxonomy, encoder, search, now_starter)
            row = {"titles": len(taxonomy.dev)}
            for key, label in (("top_right", "acc@1"), ("recall", "candidate_recall")):
                row[label] = {
                    "before": round(float(before[key].mean()), 4),
                    "now": round(float(now[key].mean()), 4),
                    "paired": paired(now[key], before[key]),
                }
            report["taxonomies"][name] = row
            for label in ("acc@1", "candidate_recall"):
                cell = row[label]
                low, high = cell["paired"]["ci95"]
                print(
                    f"{name:5} {label:17} {cell['before']:.3f} -> {cell['now']:.3f}  "
                    f"{cell['paired']['difference']:+.3f} [{low:+.3f}, {high:+.3f}]  "
                    f"McNemar p {cell['paired']['mcnemar_p']:.2g}",
                    flush=True,
                )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
