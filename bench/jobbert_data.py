"""Real labelled traffic: JobBERT's vacancy titles and the ESCO taxonomy they are labelled with.

The titles are split once, seeded, into **dev-unseen** (5,000 distinct titles that no training,
no curator and no tuning ever sees; only measured) and the **curator stream** (the rest, which
benchmarks play as curators' inputs). Rows are split by their case-folded title, so one title
never sits on both sides. The data stays in ``../shared/data`` (its terms keep it out of the
repository); ``--data`` on each benchmark points elsewhere.
"""

from __future__ import annotations

import csv
import random
from dataclasses import dataclass
from pathlib import Path

from models_app.siamese.text import comparison_key

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
SPLIT_SEED = 20261126
DEV_UNSEEN_TITLES = 5_000


@dataclass(frozen=True)
class LabelledTitle:
    text: str
    code: str  # the ESCO occupation's URI's last segment, as the ESCO importer codes groups


def _code(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[-1]


def esco_groups(data: Path = SHARED_DATA) -> dict[str, list[str]]:
    """ESCO code -> its preferred label first, then its alternative labels (as imported)."""
    path = data / "esco" / "occupations_en.csv"
    groups: dict[str, list[str]] = {}
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            labels = [row["preferredLabel"].strip()]
            labels += [label.strip() for label in (row["altLabels"] or "").split("\n")]
            seen: set[str] = set()
            kept = []
            for label in labels:
                if label and label.casefold() not in seen:
                    seen.add(label.casefold())
                    kept.append(label)
            groups[_code(row["conceptUri"])] = kept
    return groups


class DataError(ValueError):
    """A data file the benchmarks cannot use as it is; the message names the file and row."""


def jobbert_titles(data: Path = SHARED_DATA) -> list[LabelledTitle]:
    """Every labelled title; a file without the two columns, or a row with a title but no
    occupation, is refused by name (a blank title is no traffic and is passed over)."""
    path = data / "jobbert" / "validation_titles.csv"
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle, strict=True)
            missing = {"vacancyTitle", "conceptUri"} - set(reader.fieldnames or [])
            if missing:
                raise DataError(f"{path} lacks the column(s) {', '.join(sorted(missing))}")
            titles = []
            for row in reader:
                text, uri = (row["vacancyTitle"] or "").strip(), (row["conceptUri"] or "").strip()
                if text and not uri:
                    raise DataError(f"{path}:{reader.line_num}: {text!r} has no conceptUri")
                if text:
                    titles.append(LabelledTitle(text, _code(uri)))
            return titles
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"{path} cannot be read: {exc}") from None


def jobbert_split(
    data: Path = SHARED_DATA, *, seed: int = SPLIT_SEED, dev_titles: int = DEV_UNSEEN_TITLES
) -> tuple[list[LabelledTitle], list[LabelledTitle]]:
    """(dev-unseen, curator stream); the stream in a seeded random order, as traffic arrives."""
    rows = jobbert_titles(data)
    keys = sorted({row.text.casefold() for row in rows})
    rng = random.Random(seed)
    rng.shuffle(keys)
    unseen = set(keys[:dev_titles])
    dev = [row for row in rows if row.text.casefold() in unseen]
    stream = [row for row in rows if row.text.casefold() not in unseen]
    rng.shuffle(stream)
    return dev, stream


def check_labels(titles: list[LabelledTitle], codes: set[str] | dict[str, int]) -> None:
    """Refuse titles labelled with an occupation the taxonomy does not hold, naming them."""
    unknown = sorted({title.code for title in titles} - set(codes))
    if unknown:
        raise DataError(
            f"{len(unknown)} occupation(s) of the labelled titles are not in ESCO's "
            f"occupations: {', '.join(unknown[:5])}{' …' if len(unknown) > 5 else ''}"
        )


def esco_members(
    data: Path = SHARED_DATA,
) -> tuple[list[tuple[int, str]], list[str], dict[str, int]]:
    """(group id, label) for every ESCO label, the codes by group id, and group id by code."""
    groups = esco_groups(data)
    codes = sorted(groups)
    ids = {code: i for i, code in enumerate(codes)}
    members = [(ids[code], label) for code in codes for label in groups[code]]
    return members, codes, ids


def consistently_labelled(texts: list[str], labels) -> list[int]:
    """The rows of titles whose label the data agrees on: a title (by its comparison key) that
    occurs more than once, always with the same label; its first row each.

    The same title carries the same occupation in both halves of the data only 60% of the
    time, so a probability is calibrated and measured where the labels agree with themselves."""
    rows_of: dict[str, list[int]] = {}
    for row, text in enumerate(texts):
        rows_of.setdefault(comparison_key(text), []).append(row)
    return sorted(
        rows[0]
        for rows in rows_of.values()
        if len(rows) > 1 and len({labels[row] for row in rows}) == 1
    )
