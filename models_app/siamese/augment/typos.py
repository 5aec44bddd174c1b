"""Typos: characters substituted (a keyboard neighbour or any letter), deleted, inserted or
swapped, at a rate or an exact count."""

from __future__ import annotations

import random
import string

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
