"""How an input's words meet a member string or a group name: the highlighted evidence on the
review card, the nearest members beside it, and the folded words the reassign search matches.
Plain strings in, plain values out: the templates escape whatever they show."""

from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"\w+")


def plain_word(word: str) -> str:
    """A word with its case and accents folded: what a word typed so far is a prefix of."""
    if word.isascii():  # most words of most taxonomies: nothing to decompose
        return word.lower()
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def fold_word(word: str) -> str:
    """A word as compared: case and accents folded, a plural "s" dropped ("Nurses" = "nurse")."""
    folded = plain_word(word)
    if len(folded) > 3 and folded.endswith("s") and not folded.endswith("ss"):
        folded = folded[:-1]
    return folded


def words(text: str) -> set[str]:
    return {fold_word(word) for word in _WORD.findall(text)}


def plain_words(text: str) -> set[str]:
    return {plain_word(word) for word in _WORD.findall(text)}


def matched_parts(text: str, words_of_input: set[str]) -> list[tuple[str, bool]]:
    """``text`` cut into (piece, matched) runs, a word being matched when the input has it too.

    Joined, the pieces give ``text`` back unchanged; the template marks the matched ones, each
    piece escaped like any other text.
    """
    parts: list[tuple[str, bool]] = []
    position = 0
    for word in _WORD.finditer(text):
        if fold_word(word.group()) not in words_of_input:
            continue
        if word.start() > position:
            parts.append((text[position : word.start()], False))
        parts.append((word.group(), True))
        position = word.end()
    if position < len(text):
        parts.append((text[position:], False))
    return parts


def _trigrams(text: str) -> set[str]:
    padded = f"  {' '.join(fold_word(word) for word in _WORD.findall(text))} "
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
