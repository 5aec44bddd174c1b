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
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def answers(root: Path, titles: list[str]) -> list[dict]:
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
    from models_app.services.builds import model_version_import
    from models_app.services.indexes import deployment_activate, index_build_create
    from models_app.serving import normalize

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


def compare(before: list[dict], after: list[dict]) -> None:
    if [a["text"] for a in before] != [a["text"] for a in after]:
        raise SystemExit("the two files answer different titles")

    def top(answer: dict) -> str | None:
        return answer["groups"][0]["code"] if answer["groups"] else None

    whole = sum(a == b for a, b in zip(before, after, strict=True))
    first = sum(top(a) == top(b) for a, b in zip(before, after, strict=True))
    print(f"{'titles':>8}{'identical answers':>19}{'same top group':>16}")
    print(f"{len(before):>8}{whole:>19}{first:>16}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=HERE.parent, help="checkout to answer with")
    parser.add_argument("--out", type=Path, help="where to write the answers (JSON)")
    parser.add_argument("--titles", type=int, default=2000, help="dev-unseen titles to answer")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        compare(*(json.loads(path.read_text()) for path in args.compare))
        return
    if args.out is None:
        parser.error("--out is required unless --compare is given")
    sys.path.insert(0, str(HERE.parent))
    from bench.jobbert_data import jobbert_split

    dev_unseen, _ = jobbert_split()
    titles = sorted({title.text for title in dev_unseen})[: args.titles]
    found = answers(args.root.resolve(), titles)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(found))
    print(f"{len(found)} answers by {args.root.resolve()} -> {args.out}")


if __name__ == "__main__":
    main()
