"""Spelled-out forms as members: does "Emergency Room Registered Nurse (ER RN)" answer better
beside "ER RN" (its shorter form) as a member of its own, or both forms?

The title tower reads each form of such a member when it trains (``spelled_out_forms``); an
O*NET import adds the shorter one as a member (``annotations/importers.py``). This compares
the taxonomy without forms, with the shorter form of each member with exactly one parenthesis
(``short``: what ships) and with both (``both``), served before any verdict as the product
does (``bench/ranker.py``'s ``Served``, the shipped starter):

- O*NET through the crosswalk, dev-unseen vacancy titles, the shipped 128-d student;
- clean O*NET alternate titles held out of the taxonomy (and of the added forms);
- ESCO dev-unseen, the title tower;
- the demo's titles a new user tried (``bench/demo_titles.py``): the right group's place.

Each acc@1 is paired against the taxonomy without forms (a 95% bootstrap interval and McNemar's
p).

    .venv/bin/python bench/spelled_out_members.py

Prints a table and writes bench/results/spelled_out_members.json.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench.demo_titles import TRIED  # noqa: E402
from bench.jobbert_data import SHARED_DATA  # noqa: E402
from bench.ranker import (  # noqa: E402
    Served,
    esco_taxonomy,
    onet_taxonomy,
    shipped_onet,
    title_tower_encoder,
    with_short_forms,
)
from bench.real_accuracy import paired  # noqa: E402
from bench.starter_ranker import answers  # noqa: E402
from bench.title_tower import clean_held_out, without  # noqa: E402
from models_app.siamese.ranker.files import STARTER_FILE  # noqa: E402
from models_app.siamese.ranker.model import PRIOR_DESCRIPTION_WEIGHT, LinearRanker  # noqa: E402
from models_app.siamese.search import SearchConfig  # noqa: E402

OUT = ROOT / "bench" / "results" / "spelled_out_members.json"
MODES = ("short", "both")


def top_right(taxonomy, encoder, search, starter, titles) -> np.ndarray:
    served = Served(taxonomy, encoder, search, PRIOR_DESCRIPTION_WEIGHT)
    texts = [text for text, _ in titles]
    labels = np.array([group for _, group in titles])
    return answers(starter, served.candidates(texts, encoder.vectors(texts)), labels)["top_right"]


def demo_places(taxonomy, encoder, search, starter) -> dict[str, int | None]:
    """Each tried title's right group's place among the served candidates (None: not one)."""
    served = Served(taxonomy, encoder, search, PRIOR_DESCRIPTION_WEIGHT)
    texts = list(TRIED)
    index = {code: i for i, code in enumerate(taxonomy.codes)}
    places = {}
    for text, found in zip(texts, served.candidates(texts, encoder.vectors(texts)), strict=True):
        order = [int(found.groups[i]) for i in np.argsort(-starter.scores(found.features),
                                                           kind="stable")]  # fmt: skip
        gold = index[TRIED[text]]
        places[text] = order.index(gold) + 1 if gold in order else None
    return places


def main() -> None:
    starter = LinearRanker.from_dict(json.loads(STARTER_FILE.read_text()))
    onet = onet_taxonomy(SHARED_DATA, short_forms=False)  # without the import's short forms
    esco = esco_taxonomy(SHARED_DATA)
    student, student_search = shipped_onet()
    tower = title_tower_encoder()
    held, gone = clean_held_out(onet)
    kept = without(onet.members, gone)
    sets = {
        "onet_vacancy": (onet, onet.members, student, student_search, onet.dev),
        "onet_clean": (onet, kept, student, student_search, held),
        "esco_vacancy": (esco, esco.members, tower, SearchConfig(lexical_weight=0.0), esco.dev),
    }
    report: dict = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "command": "bench/spelled_out_members.py",
        "sets": {},
        "demo": {},
    }
    for name, (taxonomy, members, encoder, search, titles) in sets.items():
        plain = top_right(replace(taxonomy, members=members), encoder, search, starter, titles)
        row = {"titles": len(titles), "without": round(float(plain.mean()), 4)}
        for mode in MODES:
            added = replace(taxonomy, members=with_short_forms(members, both=mode == "both"))
            found = top_right(added, encoder, search, starter, titles)
            row[mode] = {
                "members_added": len(added.members) - len(members),
                "acc@1": round(float(found.mean()), 4),
                "paired": paired(found, plain),
            }
        report["sets"][name] = row
        print(f"{name:13} {len(titles):5} titles  without {row['without']:.3f}", end="")
        for mode in MODES:
            cell = row[mode]
            low, high = cell["paired"]["ci95"]
            print(f"  {mode} {cell['acc@1']:.3f} ({cell['paired']['difference']:+.4f} "
                  f"[{low:+.4f}, {high:+.4f}])", end="")  # fmt: skip
        print(flush=True)
    for mode in ("without", *MODES):
        members = (
            onet.members
            if mode == "without"
            else with_short_forms(onet.members, both=mode == "both")
        )
        places = demo_places(replace(onet, members=members), student, student_search, starter)
        report["demo"][mode] = places
        near = sum(place is not None and place <= 2 for place in places.values())
        print(f"demo titles, {mode:8}: {near} of {len(places)} right or second  {places}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
