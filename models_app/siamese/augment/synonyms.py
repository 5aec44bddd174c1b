"""Synonyms: the manual list (``resources/synonyms.txt``) and pairs induced from a taxonomy's
groups (two titles of one group that differ by one word), applied to a title one swap at a time."""

from __future__ import annotations

import functools
import itertools
import random
import re
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from models_app.siamese.text import comparison_key

MANUAL_SYNONYMS_PATH = Path(__file__).parent.parent / "resources" / "synonyms.txt"


K = TypeVar("K", bound=Hashable)


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
            if phrase and comparison_key(phrase) not in seen:
                seen.add(comparison_key(phrase))
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
            key = frozenset((comparison_key(a), comparison_key(b)))
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
# phases) only the groups a curator added to change, so the rest need not be induced again.
# A few kilobytes a group.
GROUPS_CACHED = 2**14


@functools.lru_cache(maxsize=GROUPS_CACHED)
def group_candidates(
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
        key: tuple(t for t in dict.fromkeys(comparison_key(t) for t in titles) if t)
        for key, titles in groups.items()
    }
    whole_titles = {title for titles in distinct.values() for title in titles}
    support: Counter[SynonymPair] = Counter()
    found: dict[K, set[SynonymPair]] = defaultdict(set)
    for key, normalized in distinct.items():
        for a, b in group_candidates(
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
            ka, kb = comparison_key(a), comparison_key(b)
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
            if comparison_key(m.group()) in self._alternatives
        ]
        if not matches:
            return None
        match = rng.choice(matches)
        replacement = rng.choice(self._alternatives[comparison_key(match.group())])
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
