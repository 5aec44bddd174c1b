"""The answers a checkout serves on real titles, to show that a change of code changed none.

Loads the bundled O*NET taxonomy and its shipped model into a scratch SQLite database (as
``normalize_speed.py`` does), answers JobBERT's dev-unseen vacancy titles with the product's
normalize and writes every answer (groups, scores, probabilities) to JSON. ``--root`` answers
with another checkout's code (a ``git worktree`` of an older commit); ``--compare`` prints how
many answers two such files share, whole and by their top group.

    .venv/bin/python bench/served_answers.py --out var/answers-now.json
    git worktree add /tmp/before <commit>
    .venv/bin/python bench/served_answers.py --root /tmp/before --out var/answers-before.json
    .venv/bin/python bench/served_answers.py --compare var/answers-before.json var/answers-now.json

``--compare`` also gives the share of titles with the same top group with its 95% (Wilson)
interval, the largest differences of a group's score and probability between the two files
(groups both answer for a title) against ``TOLERANCE``, lists the titles whose top group
changed, and writes it all to bench/results/served_answers.json (``--json`` elsewhere).
Issue #44's bar for a change that should change no answer: 99.5% of the top groups the same,
scores and probabilities within ``TOLERANCE``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
# How far a group's score or probability may move between two checkouts and count as the same
# answer: the answers show four decimals.
TOLERANCE = 1e-4


def answers(root: Path, titles: list[str]) -> list[dict]:
    # Celery's Django fix-up puts the working directory first on sys.path: from another
    # checkout's folder, that checkout's code would answer.
    os.chdir(root)
    sys.path.insert(0, str(root))
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "siamweb.settings",
            "SIAMWEB_VAR_DIR": tempfile.mkdtemp(prefix="siamweb-answers-"),
            "DATABASE_URL": "",
            "CELERY_BROKER_URL": "filesystem://",
            "LOG_LEVEL": "WARNING",
        }
    )
    import django

    django.setup()
    from django.core.management import call_command

    from annotations.services.taxonomy import taxonomy_import
    from models_app.serving import normalize
    from models_app.training.services.builds import model_version_import
    from models_app.training.services.indexes import deployment_activate, index_build_create

    # The ranking call kept its older name in commits before the glossary's renames.
    rank = getattr(normalize, "rank_taxonomy_groups", None) or normalize.normalize_texts
    call_command("migrate", verbosity=0)
    taxonomy = taxonomy_import(slug="onet", path=root / "data" / "onet", fmt="onet").taxonomy
    version = model_version_import(taxonomy=taxonomy, folder=root / "data" / "models" / "onet")
    deployment_activate(index_build=index_build_create(model_version=version))
    return [
        {"text": answer.text, "groups": [group.as_dict() for group in answer.groups]}
        for answer in rank(taxonomy, titles, k=5)
    ]


def wilson(hits: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion ``hits / total``."""
    if not total:
        return 0.0, 1.0
    p = hits / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return max(0.0, centre - half), min(1.0, centre + half)


def compare(before: list[dict], after: list[dict]) -> dict:
    if [a["text"] for a in before] != [a["text"] for a in after]:
        raise SystemExit("the two files answer different titles")

    def top(answer: dict) -> str | None:
        return answer["groups"][0]["code"] if answer["groups"] else None

    def codes(answer: dict) -> list[str]:
        return [group["code"] for group in answer["groups"]]

    pairs = list(zip(before, after, strict=True))
    whole = sum(a == b for a, b in pairs)
    groups = sum(codes(a) == codes(b) for a, b in pairs)
    first = sum(top(a) == top(b) for a, b in pairs)
    low, high = wilson(first, len(pairs))
    changed = [
        {"text": a["text"], "before": codes(a), "after": codes(b)}
        for a, b in pairs
        if top(a) != top(b)
    ]
    score_gap, probability_gap, probability_lost = 0.0, 0.0, 0
    for a, b in pairs:
        after = {group["code"]: group for group in b["groups"]}
        for group in a["groups"]:
            other = after.get(group["code"])
            if other is None:
                continue
            score_gap = max(score_gap, abs(group["score"] - other["score"]))
            if (group["probability"] is None) != (other["probability"] is None):
                probability_lost += 1
            elif group["probability"] is not None:
                probability_gap = max(
                    probability_gap, abs(group["probability"] - other["probability"])
                )
    within = score_gap <= TOLERANCE and probability_gap <= TOLERANCE and not probability_lost
    print(f"{'titles':>8}{'identical answers':>19}{'same groups':>13}{'same top group':>16}"
          f"{'95% interval':>18}")  # fmt: skip
    print(f"{len(pairs):>8}{whole:>19}{groups:>13}{first:>16}"
          f"{f'{100 * low:.2f}-{100 * high:.2f}%':>18}")  # fmt: skip
    print(f"largest difference of a group's score {score_gap:.2g}, of its probability "
          f"{probability_gap:.2g} ({probability_lost} with a probability on one side only): "
          f"{'within' if within else 'NOT within'} {TOLERANCE:g}")  # fmt: skip
    for row in changed:
        print(f"  {row['text']!r}: {row['before'][:1]} -> {row['after'][:1]}")
    return {
        "titles": len(pairs),
        "identical_answers": whole,
        "same_groups_in_order": groups,
        "same_top_group": first,
        "same_top_group_share": first / len(pairs) if pairs else None,
        "same_top_group_95_interval": [low, high],
        "largest_score_difference": score_gap,
        "largest_probability_difference": probability_gap,
        "probability_on_one_side_only": probability_lost,
        "within_tolerance": within,
        "tolerance": TOLERANCE,
        "top_group_changed": changed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=HERE.parent, help="checkout to answer with")
    parser.add_argument("--out", type=Path, help="where to write the answers (JSON)")
    parser.add_argument("--titles", type=int, default=5000, help="dev-unseen titles to answer")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    parser.add_argument(
        "--json", type=Path, default=HERE / "results" / "served_answers.json",
        help="where --compare writes its figures",
    )  # fmt: skip
    args = parser.parse_args()
    if args.compare:
        found = compare(*(json.loads(path.read_text()) for path in args.compare))
        found["files"] = [str(path) for path in args.compare]
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(found, indent=2))
        print(f"wrote {args.json}")
        return
    if args.out is None:
        parser.error("--out is required unless --compare is given")
    args.out = args.out.resolve()
    sys.path.insert(0, str(HERE.parent))
    from bench.jobbert_data import jobbert_split

    dev_unseen, _ = jobbert_split()
    titles = sorted({title.text for title in dev_unseen})[: args.titles]
    found = answers(args.root.resolve(), titles)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(found))
    from models_app.serving import normalize

    print(f"{len(found)} answers by {Path(normalize.__file__).parents[2]} -> {args.out}")


if __name__ == "__main__":
    main()
