"""Data augmentations of Neculoiu et al. (2016), each a source of invariance the model must learn.

The paper grows its training set in stages — typos, synonyms, extra words, feedback — and tests
each stage with a matching test set (see ``evaluation.build_test_suite``). Every function here
takes an explicit ``random.Random`` so that a training set or a test suite is reproducible from
its seed alone, independent of global state or of the order other code draws random numbers.
"""

from __future__ import annotations

import functools
import itertools
import random
import re
import string
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal, TypeVar

from models_app.siamese.text import normalize_text

MANUAL_SYNONYMS_PATH = Path(__file__).parent / "resources" / "synonyms.txt"

K = TypeVar("K", bound=Hashable)

# ---------------------------------------------------------------------------------------------
# Typos
# ---------------------------------------------------------------------------------------------

_LETTERS = string.ascii_lowercase
_KEYBOARD_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")


def _keyboard_neighbours() -> dict[str, str]:
    """Letters adjacent on a QWERTY keyboard (same row left/right, and the rows above/below)."""
    position = {ch: (r, c) for r, row in enumerate(_KEYBOARD_ROWS) for c, ch in enumerate(row)}
    neighbours: dict[str, str] = {}
    for ch, (r, c) in position.items():
        near = [
            other
            for other, (r2, c2) in position.items()
            if other != ch and abs(r2 - r) <= 1 and abs(c2 - c) <= 1
        ]
        neighbours[ch] = "".join(sorted(near))
    return neighbours


_NEIGHBOURS = _keyboard_neighbours()


def _substitute(ch: str, rng: random.Random, *, keyboard: bool) -> str:
    """A different letter in place of ``ch``, keeping its case.

    The paper says only that characters are "randomly substituted", so the default draws from the
    plain alphabet; ``keyboard=True`` draws from QWERTY neighbours instead, which is closer to
    real finger slips. Any character (space, digit, punctuation) can be hit, as in the paper, but
    the replacement is always a letter, and never the character it replaces — a substitution that
    changes nothing would quietly lower the rate.
    """
    lower = ch.lower()
    pool = _NEIGHBOURS.get(lower, "") if keyboard else ""
    if not pool:
        pool = _LETTERS.replace(lower, "") if lower in _LETTERS else _LETTERS
    new = rng.choice(pool)
    return new.upper() if ch.isupper() else new


def _check_rate(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be between 0 and 1, got {value}")


def add_typos(
    text: str,
    rng: random.Random,
    *,
    substitute: float = 0.2,
    delete: float = 0.05,
    keyboard: bool = False,
) -> str:
    """Each character is independently deleted (``delete``) or substituted (``substitute``).

    The defaults are the paper's training augmentation: "the same string but with 20% of
    characters randomly substituted and 5% randomly deleted". A result that would be empty gives
    the text back unchanged, since an empty string is no title at all.
    """
    _check_rate("substitute", substitute)
    _check_rate("delete", delete)
    if substitute + delete > 1.0:
        raise ValueError("substitute + delete must not exceed 1")
    out: list[str] = []
    for ch in text:
        draw = rng.random()
        if draw < delete:
            continue
        out.append(_substitute(ch, rng, keyboard=keyboard) if draw < delete + substitute else ch)
    return "".join(out) or text


def add_typos_exact(
    text: str,
    rng: random.Random,
    *,
    rate: float = 0.05,
    min_edits: int = 1,
    delete_share: float = 0.5,
    keyboard: bool = False,
) -> str:
    """Exactly ``max(min_edits, round(rate * len))`` edits at distinct positions.

    The paper's Typos *test* set has "5% of their characters randomly substituted or deleted".
    A per-character coin would leave most short titles untouched (a 12-character title has a 54%
    chance of no edit at 5%), turning the test into an exact-match check, so the test set takes
    "5% of the characters" as a count, with at least one edit. The paper gives no ratio between
    substitutions and deletions; ``delete_share`` is that ratio. The last character is never
    deleted, so the result is never empty.
    """
    _check_rate("rate", rate)
    _check_rate("delete_share", delete_share)
    if not text:
        return text
    edits = min(len(text), max(min_edits, round(rate * len(text))))
    chars: list[str | None] = list(text)
    for position in rng.sample(range(len(text)), edits):
        remaining = sum(ch is not None for ch in chars)
        if remaining > 1 and rng.random() < delete_share:
            chars[position] = None
        else:
            chars[position] = _substitute(text[position], rng, keyboard=keyboard)
    return "".join(ch for ch in chars if ch is not None)


# ---------------------------------------------------------------------------------------------
# Synonyms
# ---------------------------------------------------------------------------------------------

SynonymPair = tuple[str, str]

# Parts of an induced candidate must be plain words: letters or digits, optionally joined by a
# hyphen or apostrophe. The paper: "the parts do not contain special characters like '&'".
_PLAIN_WORD = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*")


def load_synonym_groups(path: Path | str = MANUAL_SYNONYMS_PATH) -> list[list[str]]:
    """Groups of interchangeable phrases: one group a line, phrases separated by `` | ``.

    Blank lines and ``#`` comments are skipped. A line with fewer than two distinct phrases is a
    mistake in the file, not something to skip silently, so it raises ``ValueError``.
    """
    groups: list[list[str]] = []
    for number, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        phrases: list[str] = []
        seen: set[str] = set()
        for part in line.split("|"):
            phrase = " ".join(part.split())
            if phrase and normalize_text(phrase) not in seen:
                seen.add(normalize_text(phrase))
                phrases.append(phrase)
        if len(phrases) < 2:
            raise ValueError(f"{path}:{number}: a synonym line needs at least two phrases")
        groups.append(phrases)
    return groups


def load_synonyms(path: Path | str = MANUAL_SYNONYMS_PATH) -> list[SynonymPair]:
    """Every pair of phrases that share a line of the manual file, in file order, deduplicated."""
    pairs: list[SynonymPair] = []
    seen: set[frozenset[str]] = set()
    for group in load_synonym_groups(path):
        for a, b in itertools.combinations(group, 2):
            key = frozenset((normalize_text(a), normalize_text(b)))
            if key not in seen:
                seen.add(key)
                pairs.append((a, b))
    return pairs


def _complement(words: list[str], shared: set[str]) -> tuple[int, int] | None:
    """The span ``[start, end)`` of the words outside ``shared``, or None if not one run.

    A candidate is only useful if it can be substituted, and only a contiguous run of words can
    be swapped for another phrase in place. An empty complement (one title inside the other,
    "developer" / "senior developer") is no pair of synonyms either.
    """
    positions = [i for i, word in enumerate(words) if word not in shared]
    if not positions or positions[-1] - positions[0] + 1 != len(positions):
        return None
    return positions[0], positions[-1] + 1


# Groups whose candidates are kept, keyed by their titles and the options: every training run
# induces synonyms over the whole taxonomy again, and between two runs (or a fine-tune's two
# phases) only the groups a curator added to change. Inducing them was 5-10 s of each run's
# set-up (bench/finetune_speed.py). A few kilobytes a group.
GROUPS_CACHED = 2**14


@functools.lru_cache(maxsize=GROUPS_CACHED)
def _group_candidates(
    titles: tuple[str, ...],
    min_shared_words: int,
    max_shared_words: int,
    max_part_words: int,
    aligned: bool,
) -> tuple[SynonymPair, ...]:
    """The candidates one group's distinct normalized ``titles`` yield, one per title pair
    (a candidate two pairs yield is there twice: support counts pairs), before the filters
    that look at the whole taxonomy."""
    tokenised = [t.split() for t in titles]
    word_sets = [set(words) for words in tokenised]
    candidates = []
    for i, j in itertools.combinations(range(len(tokenised)), 2):
        shared = word_sets[i] & word_sets[j]
        if not min_shared_words <= len(shared) <= max_shared_words:
            continue
        left_span = _complement(tokenised[i], shared)
        right_span = _complement(tokenised[j], shared)
        if left_span is None or right_span is None:
            continue
        (i0, i1), (j0, j1) = left_span, right_span
        if aligned and (
            tokenised[i][:i0] != tokenised[j][:j0] or tokenised[i][i1:] != tokenised[j][j1:]
        ):
            continue
        left, right = tokenised[i][i0:i1], tokenised[j][j0:j1]
        if left == right or len(left) > max_part_words or len(right) > max_part_words:
            continue
        if not all(_is_plain(word) for word in left + right):
            continue
        a, b = sorted((" ".join(left), " ".join(right)))
        candidates.append((a, b))
    return tuple(candidates)


@functools.lru_cache(maxsize=2**16)
def _is_plain(word: str) -> bool:
    return _PLAIN_WORD.fullmatch(word) is not None


def induce_synonyms_by_group(
    groups: Mapping[K, Sequence[str]],
    *,
    min_shared_words: int = 1,
    max_shared_words: int = 2,
    max_part_words: int = 2,
    allow_standalone_parts: bool = False,
    aligned: bool = True,
    min_support: int = 1,
) -> dict[K, list[SynonymPair]]:
    """Synonym candidates induced inside each group, as the paper does, keyed by group.

    The rule (Neculoiu et al. 2016, section 4.2): "we look through the taxonomy for groups in
    which two job titles share one or two words [...]. The complements of the matching strings
    form a synonym candidate [...]. If the candidate meets certain requirements (neither part
    occurs in isolation, the parts do not contain special characters like '&', the parts consist
    of at most two words), then the candidate is accepted as a synonym and is substituted
    throughout the group." Here, on normalized (casefolded) words:

    - two titles of one group share between ``min_shared_words`` and ``max_shared_words``
      distinct words; each title's complement is its remaining words, which must form one
      contiguous run (otherwise it cannot be substituted) and be non-empty;
    - each part has at most ``max_part_words`` words, all plain (letters/digits, inner hyphen or
      apostrophe: no '&', '/', '+', ...);
    - "neither part occurs in isolation" is read as: neither part is, by itself, a whole title
      anywhere in the taxonomy (a part that is a job on its own is not a modifier that can be
      swapped). ``allow_standalone_parts=True`` turns that off;
    - the paper calls the shared words "the matching strings" and its example keeps them in
      place ("C++ developer" / "C++ programmer"), so with ``aligned`` (the default) the words
      before and after the complement must be the same in both titles. Without it, "registered
      nurse" / "nurse practitioner" would make "practitioner nurse" out of "registered nurse";
    - the paper states no minimum count; ``min_support`` (title pairs, over all groups, that
      yield the candidate) is there for noisy taxonomies and defaults to 1, i.e. no filter.

    Pairs are returned sorted, each as ``(a, b)`` with ``a < b``, because the candidate is
    symmetric; each group lists the candidates it induced that were accepted.
    """
    if not 1 <= min_shared_words <= max_shared_words:
        raise ValueError("need 1 <= min_shared_words <= max_shared_words")
    if max_part_words < 1 or min_support < 1:
        raise ValueError("max_part_words and min_support must be at least 1")
    # Each group's distinct normalized titles, normalized once for both uses below.
    distinct = {
        key: tuple(t for t in dict.fromkeys(normalize_text(t) for t in titles) if t)
        for key, titles in groups.items()
    }
    whole_titles = {title for titles in distinct.values() for title in titles}
    support: Counter[SynonymPair] = Counter()
    found: dict[K, set[SynonymPair]] = defaultdict(set)
    for key, normalized in distinct.items():
        for a, b in _group_candidates(
            normalized, min_shared_words, max_shared_words, max_part_words, aligned
        ):
            if not allow_standalone_parts and (a in whole_titles or b in whole_titles):
                continue
            support[(a, b)] += 1
            found[key].add((a, b))
    return {
        key: sorted(pair for pair in pairs if support[pair] >= min_support)
        for key, pairs in found.items()
        if any(support[pair] >= min_support for pair in pairs)
    }


def induce_synonyms(
    groups: Mapping[str, Sequence[str]],
    *,
    min_shared_words: int = 1,
    max_shared_words: int = 2,
    max_part_words: int = 2,
    allow_standalone_parts: bool = False,
    aligned: bool = True,
    min_support: int = 1,
) -> list[SynonymPair]:
    """All accepted induced candidates of the taxonomy, sorted; see ``induce_synonyms_by_group``.

    The paper substitutes an induced synonym only "throughout the group" it came from; use the
    by-group form for that, and this flat list for inspection or a global synonym table.
    """
    by_group = induce_synonyms_by_group(
        groups,
        min_shared_words=min_shared_words,
        max_shared_words=max_shared_words,
        max_part_words=max_part_words,
        allow_standalone_parts=allow_standalone_parts,
        aligned=aligned,
        min_support=min_support,
    )
    return sorted({pair for pairs in by_group.values() for pair in pairs})


def _transfer_case(original: str, replacement: str) -> str:
    """Write ``replacement`` in the casing style of the text it replaces.

    All-lowercase input stays lowercase ("sr java dev"); otherwise a replacement written with
    capitals in the synonym file (an acronym such as "RN") keeps them, and a lowercase one is
    capitalised word by word when the original started with a capital ("Senior" -> "Sr.").
    """
    if original == original.lower():
        return replacement.lower()
    if replacement != replacement.lower():
        return replacement
    if original[:1].isupper():
        return " ".join(word[:1].upper() + word[1:] for word in replacement.split(" "))
    return replacement


class SynonymReplacer:
    """A compiled synonym table: find one phrase in a text and swap it for a synonym.

    Phrases match case-insensitively on word boundaries that also work for phrases ending in
    punctuation ("sr.", "c++"); at any position the longest phrase wins, so "sr." is never read
    as "sr" followed by a stray dot. Compile once and reuse when applying to many texts.
    """

    def __init__(self, synonyms: Iterable[SynonymPair]) -> None:
        alternatives: dict[str, dict[str, str]] = defaultdict(dict)
        for a, b in synonyms:
            ka, kb = normalize_text(a), normalize_text(b)
            if ka and kb and ka != kb:
                alternatives[ka].setdefault(kb, b)
                alternatives[kb].setdefault(ka, a)
        self._alternatives = {key: list(options.values()) for key, options in alternatives.items()}
        phrases = sorted(self._alternatives, key=lambda p: (-len(p), p))
        self._pattern = (
            re.compile(
                r"(?<!\w)(?:" + "|".join(re.escape(p) for p in phrases) + r")(?!\w)", re.IGNORECASE
            )
            if phrases
            else None
        )

    def __len__(self) -> int:
        return len(self._alternatives)

    def apply(self, text: str, rng: random.Random) -> str | None:
        """Replace one matching phrase, chosen at random, by one of its synonyms; None if none."""
        if self._pattern is None:
            return None
        matches = [
            m
            for m in self._pattern.finditer(text)
            if normalize_text(m.group()) in self._alternatives
        ]
        if not matches:
            return None
        match = rng.choice(matches)
        replacement = rng.choice(self._alternatives[normalize_text(match.group())])
        new = _transfer_case(match.group(), replacement)
        return text[: match.start()] + new + text[match.end() :]


class GroupSynonyms:
    """Manual synonyms anywhere, induced synonyms only inside the group that induced them.

    The paper substitutes an induced candidate "throughout the group": "developer" ->
    "programmer" learnt among software titles says nothing about "real estate developer". A
    flat table of induced pairs would apply it everywhere and give training pairs the wrong
    group. When both sources match a text, each is chosen with probability one half.
    """

    def __init__(
        self,
        manual: Iterable[SynonymPair] = (),
        induced: Mapping[Hashable, Iterable[SynonymPair]] | None = None,
    ) -> None:
        self._manual = _compiled(tuple(tuple(pair) for pair in manual))
        self._induced = {
            key: _compiled(tuple(tuple(pair) for pair in pairs))
            for key, pairs in (induced or {}).items()
        }

    @classmethod
    def from_taxonomy(
        cls, groups: Mapping[Hashable, Sequence[str]], manual: Iterable[SynonymPair] = ()
    ) -> GroupSynonyms:
        """Induce with the paper's rules (default options) and add the ``manual`` pairs."""
        return cls(manual, induce_synonyms_by_group(groups))

    def apply(self, text: str, group: Hashable, rng: random.Random) -> str | None:
        """``text`` (a title of ``group``) with one phrase swapped for a synonym, or None."""
        replacers = [self._manual]
        if group in self._induced:
            replacers.append(self._induced[group])
        variants = [v for v in (r.apply(text, rng) for r in replacers) if v is not None]
        return rng.choice(variants) if variants else None


@functools.lru_cache(maxsize=GROUPS_CACHED)
def _compiled(pairs: tuple[SynonymPair, ...]) -> SynonymReplacer:
    """A group's table, compiled once for every run that induces the same pairs (a replacer is
    never changed after it is built, so runs can share it)."""
    return SynonymReplacer(pairs)


def apply_synonym(
    text: str, synonyms: Sequence[SynonymPair] | SynonymReplacer, rng: random.Random
) -> str | None:
    """Replace one phrase of ``text`` with a synonym (both directions of each pair), or None.

    Accepts a prepared ``SynonymReplacer`` to avoid recompiling the table for every text.
    """
    replacer = synonyms if isinstance(synonyms, SynonymReplacer) else SynonymReplacer(synonyms)
    return replacer.apply(text, rng)


# ---------------------------------------------------------------------------------------------
# Extra words
# ---------------------------------------------------------------------------------------------

# The paper mines its extra words from proprietary production inputs ("looking for C++ developers
# (urgent!)", "geography teacher 0.4 contract now"). These pools imitate such job-ad noise. Each
# is split in two by ``ExtraWords`` so that test inputs carry noise never seen in training.
# fmt: off
EXTRA_WORD_POOLS: dict[str, tuple[str, ...]] = {
    "seniority": (
        "Senior", "Sr.", "Junior", "Jr.", "Lead", "Principal", "Trainee", "Graduate", "Entry Level",
        "Experienced", "Staff", "Apprentice", "Intern", "Mid-Level", "Head", "Chief", "Associate",
        "Expert", "Student", "Deputy", "Snr", "Jnr", "Veteran", "Novice",
    ),
    "location": (
        "Berlin", "Munich", "Hamburg", "London", "Manchester", "Paris", "Lyon", "Amsterdam",
        "Rotterdam", "New York, NY", "Chicago, IL", "Austin, TX", "Seattle, WA", "Boston, MA",
        "Denver, CO", "Atlanta, GA", "Toronto", "Vancouver", "Sydney", "Melbourne", "Dublin",
        "Madrid", "Barcelona", "Zurich", "Vienna", "Remote", "Hybrid", "On-site", "Work from home",
        "Nationwide", "Anywhere in Europe", "Bay Area", "Downtown",
    ),
    "contract": (
        "full-time", "part-time", "contract", "temp", "temporary", "6 months", "12-month FTC",
        "permanent", "freelance", "seasonal", "per diem", "0.4 FTE", "interim", "zero hours",
        "fixed term", "weekends only", "night shift", "day shift", "PRN", "internship",
    ),
    "gender": (
        "(m/f/d)", "(m/w/d)", "(h/f)", "(f/m/x)", "(m/f)", "(w/m/d)", "(f/h)", "(all genders)",
    ),
    "company": (
        "Acme Corp", "Globex", "Initech", "Umbrella Health", "Stark Industries", "Wayne Logistics",
        "Northwind Traders", "Contoso", "Fabrikam", "Tailspin Toys", "Vandelay Imports", "Hooli",
        "Pied Piper", "Soylent Foods", "Cyberdyne Systems", "Wonka Industries", "Gringotts Bank",
        "Oceanic Airlines", "Dunder Mifflin", "Massive Dynamic", "Blue Sun Corp",
        "Monarch Solutions",
    ),
    "requirement": (
        "5+ years", "3 years experience", "CDL-A", "CPA preferred", "degree required",
        "degree holders only", "SAP", "Excel", "bilingual Spanish", "fluent German",
        "security clearance", "valid driver's license", "forklift certified", "ACLS/BLS",
        "no experience needed", "B2B", "b2c", "OSHA 30", "PMP a plus", "SQL", "own tools",
        "DBS check", "French speaker", "willing to travel",
    ),
    "urgency": (
        "urgent!", "immediate start", "hiring now", "start ASAP", "apply today", "!!!", "new",
        "hot job", "limited positions", "sign-on bonus", "interviews this week",
        "walk-in interviews", "now hiring!!", "quick hire",
    ),
    "salary": (
        "$25/hr", "€60k", "£35,000", "$80-95k", "up to $120k", "€45.000 p.a.", "$18.50 per hour",
        "DOE", "competitive salary", "£400/day", "CHF 110'000", "great benefits", "401k match",
        "commission", "tips", "OTE $150k",
    ),
    "separator": (
        " - ", " | ", " / ", ", ", " \u2013 ", " :: ", " · ", " > ", " ; ", " ~ ",
    ),
    "brackets": (
        "()", "[]", "{}", "<>", "**",
    ),
}
# fmt: on

# How the pieces are arranged around the title. Patterns are split between train and test as
# well, so the fixed words in them ("is hiring", "wanted") are test noise or train noise, not both.
EXTRA_WORD_PATTERNS: tuple[str, ...] = (
    "{seniority} {title}",
    "{title}{separator}{location}",
    "{title} {gender}",
    "{seniority} {title} {gender}{separator}{location}",
    "{title}{separator}{contract}",
    "{company}{separator}{title}",
    "{title}{separator}{company}{separator}{location}",
    "{urgency} {title}",
    "{title}{separator}{salary}",
    "{title} {open}{requirement}{close}",
    "{title}{separator}{requirement}",
    "{title} {contract} {urgency}",
    "{seniority} {title}{separator}{salary}{separator}{contract}",
    "{company} is hiring: {title}",
    "{title} wanted{separator}{location}",
    "we are looking for a {title} {gender}",
    "{title} needed {open}{urgency}{close}",
    "{title} position at {company}",
    "job opening: {title} {open}{location}{close}",
    "{title} job in {location}",
    "{title} vacancy{separator}{contract}",
    "apply now{separator}{title}",
    "{title} join our team!",
    "{title} {location} {salary}",
    "career opportunity {title} {requirement}",
    "{title} role {open}{contract}, {location}{close}",
    "{location}{separator}{title}{separator}{requirement}",
    "{seniority} {title}{separator}{company}",
    "{title} {seniority} {requirement} {contract}",
    "seeking {title}{separator}{salary}",
)

_PATTERN_SLOT = re.compile(r"{(\w+)}")
# Noise vocabulary for the disjointness guarantee: alphabetic tokens of two letters or more.
# Digits and single letters ("5+ years", "(m/f/d)") are too generic to call vocabulary.
_NOISE_TOKEN = re.compile(r"[^\W\d_]{2,}")


def noise_tokens(text: str) -> set[str]:
    """The words of a piece of noise (or of a pattern, slots aside) that count as vocabulary."""
    return set(_NOISE_TOKEN.findall(_PATTERN_SLOT.sub(" ", text).casefold()))


def _split_pools(
    pools: Mapping[str, Sequence[str]], seed: int
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Split every pool (patterns included) in two with no shared item and no shared word.

    Items that share a vocabulary word ("3 years experience", "5+ years") are bound together by
    union-find and go to the same side, so no word of test noise was seen in training noise.
    Components are dealt to the side that has fewer items of their pools, largest first, in an
    order shuffled by ``seed``: the split is deterministic for a seed and roughly balanced.
    """
    items = [(pool, text) for pool, texts in pools.items() for text in dict.fromkeys(texts)]
    parent = list(range(len(items)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, (_, text) in enumerate(items):
        for token in sorted(noise_tokens(text)):
            if token in owner:
                parent[find(i)] = find(owner[token])
            else:
                owner[token] = i
    components: dict[int, list[int]] = defaultdict(list)
    for i in range(len(items)):
        components[find(i)].append(i)
    order = list(components.values())
    random.Random(seed).shuffle(order)
    order.sort(key=len, reverse=True)  # stable: equal sizes keep the shuffled order
    sides: tuple[dict[str, list[str]], dict[str, list[str]]] = (
        {pool: [] for pool in pools},
        {pool: [] for pool in pools},
    )
    for members in order:
        touched = Counter(items[i][0] for i in members)
        load = [sum(len(side[pool]) for pool in touched) for side in sides]
        side = sides[0] if load[0] <= load[1] else sides[1]
        for i in members:
            side[items[i][0]].append(items[i][1])
    return sides


class ExtraWords:
    """Job-ad noise around a title, from the ``train`` or the ``test`` half of every pool.

    The paper's Extra Words data are real inputs that contain a taxonomy title as a "complete and
    strict substring"; those are proprietary, so this generator imitates them: seniority,
    location, contract type, gender tags, company, requirements, urgency and salary, joined by
    varied separators in varied patterns. The two halves share no pool item, no pattern and no
    noise word, so the test measures invariance to noise the model has never seen.

    ``seed`` chooses the split, not the noise (that comes from the ``rng`` given to
    ``decorate``): the halves are disjoint only for the *same* seed. The test suite uses the
    default, so training must use ``ExtraWords("train")`` too, whatever its own seed.
    """

    def __init__(self, split: Literal["train", "test"], seed: int = 0) -> None:
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        pools = {**EXTRA_WORD_POOLS, "pattern": EXTRA_WORD_PATTERNS}
        halves = _split_pools(pools, seed)
        chosen = halves[0] if split == "train" else halves[1]
        empty = [pool for pool, items in chosen.items() if not items]
        if empty:
            raise ValueError(f"seed {seed} leaves no {split} items in pools {empty}")
        self.split = split
        self.seed = seed
        self.pools: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in chosen.items()}

    def vocabulary(self) -> set[str]:
        """Every noise word this half can produce (pattern words included)."""
        return {
            token for items in self.pools.values() for item in items for token in noise_tokens(item)
        }

    def decorate(self, title: str, rng: random.Random, *, nest: float = 0.3) -> str:
        """``title`` with noise around it; the title stays verbatim inside and something is added.

        With probability ``nest`` a second pattern wraps the first, for inputs with noise on
        several sides ("Sr. X (m/f/d) - Berlin | full-time").
        """
        decorated = self._fill(rng.choice(self.pools["pattern"]), title, rng)
        if rng.random() < nest:
            decorated = self._fill(rng.choice(self.pools["pattern"]), decorated, rng)
        return decorated

    def _fill(self, pattern: str, title: str, rng: random.Random) -> str:
        brackets = rng.choice(self.pools["brackets"])
        values = {"title": title, "open": brackets[0], "close": brackets[1]}
        for slot in _PATTERN_SLOT.findall(pattern):
            if slot not in values:
                values[slot] = rng.choice(self.pools[slot])
        return pattern.format(**values)
