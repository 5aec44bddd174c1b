"""Text cleaning shared by every entry point (API, commands, imports, the review page)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

_WHITESPACE = re.compile(r"\s+")
# Zero-width space, word joiner and byte-order mark: invisible and meaningless inside a text (a
# real ESCO label holds a zero-width space), so they are dropped; what a reader sees is the same.
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u2060\ufeff"))
# Bidirectional overrides and isolates make a text display other than it reads ("admin" +
# U+202E + "gnp.exe" shows as an image's name). Embeddings (U+202A/B, closed by U+202C) stay:
# right-to-left text pasted from other software carries them.
_BIDI_CONTROLS = frozenset("\u202d\u202e\u2066\u2067\u2068\u2069")


class TextError(ValueError):
    """A text that cannot be normalized; the message says why."""


def clean_text(text: object, *, max_length: int) -> str:
    """Return ``text`` with whitespace collapsed, or raise ``TextError`` saying what is wrong.

    Tabs and newlines count as whitespace; other control characters, bidirectional controls
    and U+FFFD (the mark of bytes that were not UTF-8) are refused rather than stripped,
    because a silently altered input would be stored and judged as something the caller never
    sent. Zero-width spaces, word joiners and byte-order marks are dropped: they change nothing
    a reader sees.
    """
    if not isinstance(text, str):
        raise TextError("must be a string")
    if any(unicodedata.category(ch) == "Cc" and ch not in "\t\n\r" for ch in text):
        raise TextError("contains control characters")
    if any(ch in _BIDI_CONTROLS for ch in text):
        raise TextError(
            "contains bidirectional override or isolate characters (U+202D, U+202E, "
            "U+2066-U+2069), which make a text display other than it reads"
        )
    if "\ufffd" in text:
        raise TextError(
            "contains U+FFFD, the mark of bytes that were not valid UTF-8: send the text as UTF-8"
        )
    cleaned = _WHITESPACE.sub(" ", text.translate(_INVISIBLE)).strip()
    if not cleaned:
        raise TextError("is empty")
    if len(cleaned) > max_length:
        raise TextError(f"is longer than {max_length} characters ({len(cleaned)})")
    return cleaned


def comparison_key(text: str) -> str:
    """The key two texts are compared by when deciding they are the same string."""
    folded = unicodedata.normalize("NFKC", text.translate(_INVISIBLE))
    return _WHITESPACE.sub(" ", folded).strip().casefold()


def char_ngram_strings(text: str, ngram_min: int, ngram_max: int) -> Iterator[str]:
    """Character n-grams of the normalized text, with a space marking both word edges, shortest
    first and in reading order, repeats included."""
    padded = f" {comparison_key(text)} "
    for n in range(ngram_min, ngram_max + 1):
        for i in range(len(padded) - n + 1):
            yield padded[i : i + n]
