"""O*NET members and a simulated curator feedback set, shared by the benchmark scripts."""

from __future__ import annotations

import csv
import random
from pathlib import Path

from models_app.siamese.augment.extra_words import ExtraWords
from models_app.siamese.augment.typos import add_typos_exact
from models_app.siamese.sampling import FeedbackExample

ROOT = Path(__file__).resolve().parent.parent
ONET = ROOT / "data" / "onet"


def onet_members() -> tuple[list[tuple[int, str]], list[str]]:
    """(group id, title) for every occupation title and alternate title; group ids index codes."""
    codes: dict[str, int] = {}
    members: list[tuple[int, str]] = []
    seen: set[tuple[int, str]] = set()
    for filename, column in (
        ("Occupation Data.txt", "Title"),
        ("Alternate Titles.txt", "Alternate Title"),
    ):
        with (ONET / filename).open(encoding="utf-8") as handle:
            for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
                group = codes.setdefault(row["O*NET-SOC Code"], len(codes))
                key = (group, row[column].casefold())
                if key not in seen:
                    seen.add(key)
                    members.append((group, row[column]))
    return members, list(codes)


def simulated_feedback(
    members: list[tuple[int, str]], *, size: int = 1500, seed: int = 7
) -> tuple[list[FeedbackExample], list[tuple[str, int]]]:
    """Curator-style inputs with known groups: titles with job-ad noise and the odd typo.

    No real curator verdicts exist for O*NET, so these stand in for them. They use the training
    half of the extra-words vocabulary, never the test half the Extra Words test uses. Two thirds
    become training feedback, one third the Annotations test.
    """
    rng = random.Random(seed)
    words = ExtraWords("train")
    chosen = rng.sample(members, size)
    inputs = []
    for group, title in chosen:
        text = words.decorate(title, rng)
        if rng.random() < 0.3:
            text = add_typos_exact(text, rng)
        inputs.append((group, text, title))
    cut = size * 2 // 3
    feedback = [
        FeedbackExample(text=text, group_id=group, label=True, member_text=title)
        for group, text, title in inputs[:cut]
    ]
    annotations = [(text, group) for group, text, _ in inputs[cut:]]
    return feedback, annotations
