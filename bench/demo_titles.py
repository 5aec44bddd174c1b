"""The demo as a new user meets it: the shipped O*NET model answering job-ad titles cold.

Imports the bundled O*NET taxonomy into a scratch database, makes the shipped model live
(``setup_demo``, as ``make run`` does) and answers, through the product's serving path
(``rank_taxonomy_groups``) with no verdict: the titles a new user tried (issue #49), each with
the occupation a recruiter would file it under, and the demo's 148 inputs. A titled answer is
counted right when its group is first, and near when it is second.

    .venv/bin/python bench/demo_titles.py

Prints a table and writes bench/results/demo_titles.json.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
scratch = tempfile.mkdtemp(prefix="siamweb-demo-titles-")
os.environ.update(
    {
        "DJANGO_SETTINGS_MODULE": "siamweb.settings",
        "SIAMWEB_VAR_DIR": scratch,
        "DATABASE_URL": "",
        "CELERY_BROKER_URL": "filesystem://",
        "LOG_LEVEL": "WARNING",
    }
)

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from models_app.serving.normalize import rank_taxonomy_groups  # noqa: E402
from siamweb.taxonomy_reads import taxonomy_get  # noqa: E402

OUT = ROOT / "bench" / "results" / "demo_titles.json"
# The titles of issue #49, with the O*NET occupation each belongs to.
TRIED = {
    "RN, Med/Surg, $5,000 sign-on bonus": "29-1141.00",
    "RN - Emergency Department": "29-1141.00",
    "Travel RN": "29-1141.00",
    "LPN - part time": "29-2061.00",
    "Electrician - part time": "47-2111.00",
    "Mechanic - remote": "49-3023.00",
    "CEO": "11-1011.00",
}


def main() -> None:
    call_command("migrate", verbosity=0)
    call_command("setup_demo", stdout=io.StringIO())
    taxonomy = taxonomy_get("onet")
    demo = [line.strip() for line in (ROOT / "data" / "demo_inputs.txt").read_text().splitlines()]
    demo = [line for line in demo if line]
    texts = list(TRIED) + demo
    answers = rank_taxonomy_groups(taxonomy, texts, k=5)
    rows = []
    for text, answer in zip(texts, answers, strict=True):
        groups = [(g.code, g.name, round(g.probability or 0.0, 3)) for g in answer.groups]
        rows.append({"text": text, "groups": groups[:3], "gold": TRIED.get(text)})
    print(f"{'title':40} {'gold':11} first (p), second")
    tried = rows[: len(TRIED)]
    for row in tried:
        codes = [code for code, _, _ in row["groups"]]
        row["place"] = codes.index(row["gold"]) + 1 if row["gold"] in codes else None
        first, second = row["groups"][0], row["groups"][1]
        print(
            f"{row['text'][:40]:40} {row['gold']:11} {first[1][:30]} ({first[2]}), {second[1][:30]}"
        )
    first = sum(1 for row in tried if row["place"] == 1)
    second = sum(1 for row in tried if row["place"] == 2)
    print(f"tried titles: {first} of {len(tried)} first, {second} second")
    report = {
        "tried": tried,
        "tried_first": first,
        "tried_second": second,
        "demo": rows[len(TRIED) :],
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
