"""How an input's words meet a member string or a group name: the highlighted evidence on the
review card, the nearest members beside it, and the type-ahead's ranking. Plain strings in,
plain values out: the templates escape whatever they show."""

from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"\w+")


def _fold(word: str) -> str:
    """A word as compared: case and accents folded, a plural "s" dropped ("Nurses" = "nurse")."""
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    folded = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    if len(folded) > 3 and folded.endswith("s") and not folded.endswith("ss"):
        folded = folded[:-1]
    return folded


def words(text: str) -> set[str]:
    return {_fold(word) for word in _WORD.findall(text)}


def matched_parts(text: str, words_of_input: set[str]) -> list[tuple[str, bool]]:
    """``text`` cut into (piece, matched) runs, a word being matched when the input has it too.

    Joined, the pieces give ``text`` back unchanged; the template marks the matched ones, each
    piece escaped like any other text.
    """
    parts: list[tuple[str, bool]] = []
    position = 0
    for word in _WORD.finditer(text):
        if _fold(word.group()) not in words_of_input:
            continue
        if word.start() > position:
            parts.append((text[position : word.start()], False))
        parts.append((word.group(), True))
        position = word.end()
    if position < len(text):
        parts.append((text[position:], False))
    return parts


def _trigrams(text: str) -> set[str]:
    padded = f"  {' '.join(_fold(word) for word in _WORD.findall(text))} "
    return {padded[i : i + 3] for i in range(len(padded) - 2)}


def _dice(left: set[str], right: set[str]) -> float:
    if not left or not right:
        return 0.0
    return 2 * len(left & right) / (len(left) + len(right))


def similarity(a: str, b: str) -> float:
    """Character-trigram Dice similarity of two strings, 0 to 1 (words folded as above)."""
    return _dice(_trigrams(a), _trigrams(b))


def nearest(text: str, candidates: list[str], n: int) -> list[str]:
    """The ``n`` candidates most similar to ``text``; equally near ones keep their order."""
    wanted = _trigrams(text)
    return sorted(candidates, key=lambda c: -_dice(wanted, _trigrams(c)))[:n]


def name_relevance(name: str, code: str, query: str) -> int:
    """How well a group answers a type-ahead query, 0 best: the exact name or code; the code
    starting with the query, or every word of the query a whole word of the name, wherever it
    stands ("nurse" in "Nurse Midwives" and in "Registered Nurses" alike: between those the
    model's score for the input decides, so the likely group comes first); the name starting
    with the query mid-word (a word still being typed, or "Nursery" for "nurse"); the query
    anywhere else in the name."""
    folded_query = " ".join(query.casefold().split())
    folded_name = " ".join(name.casefold().split())
    folded_code = code.casefold()
    if folded_name == folded_query or folded_code == folded_query:
        return 0
    if folded_code.startswith(folded_query) or words(query) <= words(name):
        return 1
    if folded_name.startswith(folded_query):
        return 2
    return 3
