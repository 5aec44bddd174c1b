"""The corrigibility benchmark's data: O*NET alternate titles held out of the taxonomy, the
reduced taxonomy imported without them, and each held-out title as a realistic input (job-ad
words around it, sometimes a typo) with its gold occupation (bench/corrigibility_onet.py)."""

from __future__ import annotations

import csv
import random
import shutil
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from models_app.siamese.augment.extra_words import ExtraWords
from models_app.siamese.augment.typos import add_typos_exact
from models_app.siamese.text import comparison_key

ONET = Path(__file__).resolve().parent.parent / "data" / "onet"
OCCUPATIONS = "Occupation Data.txt"
ALTERNATES = "Alternate Titles.txt"
RELATED = "Related Occupations.txt"
SLUG = "onet-holdout"


# --- data: held-out titles as realistic inputs ----------------------------------------------


@dataclass(frozen=True)
class Example:
    text: str  # the input as a service sends it
    title: str  # the held-out O*NET title inside it
    code: str  # its occupation: the gold label


def _tab_rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


def held_out_titles(*, count: int, min_titles: int, seed: int) -> list[tuple[str, str]]:
    """(code, alternate title) pairs to take out of the taxonomy, in a seeded order.

    A candidate's normalized text must name one occupation only and not be an occupation's own
    title (so removing its rows removes it from the taxonomy), and its occupation must have at
    least ``min_titles`` distinct titles. At most a third of an occupation's alternates go, so
    every occupation keeps most of what it had.
    """
    codes_of: dict[str, set[str]] = defaultdict(set)
    occupation_titles = set()
    for row in _tab_rows(ONET / OCCUPATIONS):
        key = comparison_key(row["Title"])
        codes_of[key].add(row["O*NET-SOC Code"])
        occupation_titles.add(key)
    alternates: dict[str, dict[str, str]] = defaultdict(dict)  # code -> key -> title
    for row in _tab_rows(ONET / ALTERNATES):
        key = comparison_key(row["Alternate Title"])
        codes_of[key].add(row["O*NET-SOC Code"])
        alternates[row["O*NET-SOC Code"]].setdefault(key, row["Alternate Title"].strip())
    titles_per_code = Counter(code for codes in codes_of.values() for code in codes)
    candidates = sorted(
        (code, key, title)
        for code, titles in alternates.items()
        if titles_per_code[code] >= min_titles
        for key, title in titles.items()
        if len(codes_of[key]) == 1 and key not in occupation_titles
    )
    random.Random(seed).shuffle(candidates)
    cap = {code: len(titles) // 3 for code, titles in alternates.items()}
    taken: Counter[str] = Counter()
    chosen: list[tuple[str, str]] = []
    for code, _key, title in candidates:
        if len(chosen) == count:
            break
        if taken[code] < cap[code]:
            taken[code] += 1
            chosen.append((code, title))
    if len(chosen) < count:
        raise SystemExit(f"only {len(chosen)} titles can be held out, {count} wanted")
    return chosen


def reduced_onet(held_out: list[tuple[str, str]]) -> Path:
    """A scratch O*NET folder without the held-out alternate titles (every row of each)."""
    gone = {(code, comparison_key(title)) for code, title in held_out}
    folder = Path(tempfile.mkdtemp(prefix="siamweb-onet-holdout-"))
    for name in (OCCUPATIONS, RELATED):
        shutil.copyfile(ONET / name, folder / name)
    lines = (ONET / ALTERNATES).read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [lines[0]]
    for line in lines[1:]:
        fields = line.rstrip("\r\n").split("\t")
        if (fields[0], comparison_key(fields[1])) not in gone:
            kept.append(line)
    (folder / ALTERNATES).write_text("".join(kept), encoding="utf-8")
    print(
        f"taxonomy: {len(lines) - len(kept):,} alternate-title rows held out of {len(lines) - 1:,}"
    )
    return folder


def realistic_examples(
    held_out: list[tuple[str, str]], *, seed: int, max_length: int = 200
) -> list[Example]:
    """One input per held-out title, made like ``bench/_pg.realistic_inputs``; every input's
    normalized text distinct (the API would fold two equal ones into one review item)."""
    rng = random.Random(seed)
    words = ExtraWords("train")
    seen: set[str] = set()
    examples = []
    for code, title in held_out:
        text = _noisy_input(title, rng, words, seen, attempts=20, max_length=max_length)
        if text is None:
            raise SystemExit(f"no distinct input of at most {max_length} characters for {title!r}")
        examples.append(Example(text=text, title=title, code=code))
    return examples


def _noisy_input(
    title: str,
    rng: random.Random,
    words,
    seen: set[str],
    *,
    attempts: int,
    max_length: int,
    always_decorate: bool = False,
) -> str | None:
    """The title with job-ad words around it (always, or 80% of the time) and a typo (33%),
    whose normalized text is not in ``seen`` (it is added); None after ``attempts`` tries."""
    for _attempt in range(attempts):
        decorate = always_decorate or rng.random() < 0.8
        text = words.decorate(title, rng) if decorate else title
        if rng.random() < 0.33:
            text = add_typos_exact(text, rng)
        text = " ".join(text.split())
        if len(text) <= max_length and comparison_key(text) not in seen:
            seen.add(comparison_key(text))
            return text
    return None


def realistic_variants(
    examples: list[Example], *, avoid: list[Example], seed: int, max_length: int = 200
) -> list[Example]:
    """Another input around each example's title, with fresh noise: same title and group,
    a normalized text unlike any input's."""
    rng = random.Random(seed)
    words = ExtraWords("train")
    seen = {comparison_key(e.text) for e in avoid}
    variants = []
    for example in examples:
        text = _noisy_input(
            example.title,
            rng,
            words,
            seen,
            attempts=50,
            max_length=max_length,
            always_decorate=True,
        )
        if text is None:
            raise SystemExit(f"no fresh variant of {example.title!r}")
        variants.append(Example(text=text, title=example.title, code=example.code))
    return variants
