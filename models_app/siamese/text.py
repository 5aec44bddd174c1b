"""Text cleaning shared by every entry point (API, commands, imports, the review page)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

_WHITESPACE = re.compile(r"\s+")


class TextError(ValueError):
    """A text that cannot be normalized; the message says why."""


def clean_text(text: object, *, max_length: int) -> str:
    """Return ``text`` with whitespace collapsed, or raise ``TextError`` saying what is wrong.

    Tabs and newlines count as whitespace; other control characters are refused rather than
    stripped, because a silently altered input would be stored and judged as something the
    caller never sent.
    """
    if not isinstance(text, str):
        raise TextError("must be a string")
    if any(unicodedata.category(ch) == "Cc" and ch not in "\t\n\r" for ch in text):
        raise TextError("contains control characters")
    cleaned = _WHITESPACE.sub(" ", text).strip()
    if not cleaned:
        raise TextError("is empty")
    if len(cleaned) > max_length:
        raise TextError(f"is longer than {max_length} characters ({len(cleaned)})")
    return cleaned


def comparison_key(text: str) -> str:
    """The key two texts are compared by when deciding they are the same string."""
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", text)).strip().casefold()


def char_ngram_strings(text: str, ngram_min: int, ngram_max: int) -> Iterator[str]:
    """Character n-grams of the normalized text, with a space marking both word edges, shortest
    first and in reading order, repeats included."""
    padded = f" {comparison_key(text)} "
    for n in range(ngram_min, ngram_max + 1):
        for i in range(len(padded) - n + 1):
            yield padded[i : i + n]
