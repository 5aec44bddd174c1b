"""The one text rule: what every text a person types (inputs, members, names, descriptions,
flag comments, guidelines) may hold, for every way in (API, pages, commands, imports, uploads).

A text is refused, saying which character and why, when it holds a character that makes it
display other than it reads or hides part of it; a silently altered text would be stored and
judged as something its sender never wrote. Characters that show nothing and mean nothing in a
short text are dropped instead (the engine's list, ``models_app/siamese/text.py``, by which texts
compare), so that pasted text is taken as it looks.

When two accepted texts are one (an input sent twice, a member added again) is the engine's
``comparison_key``: curation takes it from here, its one door to the engine's text handling, so
that what it merges is what the model matches as one.
"""

from __future__ import annotations

import re
import unicodedata

from models_app.siamese.text import (
    ALWAYS_DROPPED,
    DROPPED,
    VARIATION_SELECTORS,
    ZERO_WIDTH_JOINERS,
    comparison_key,
    spelled_out_forms,
)

__all__ = [
    "DROPPED",
    "REFUSED_RANGES",
    "TextError",
    "clean_multiline_text",
    "clean_text",
    "comparison_key",
    "refusal",
    "spelled_out_forms",  # the ways one title is written, which curation's O*NET import reads
]

_WHITESPACE = re.compile(r"\s+")
_ALWAYS_DROP = dict.fromkeys(map(ord, ALWAYS_DROPPED))
_JOINER = re.compile(f"[{ZERO_WIDTH_JOINERS}]")
_VARIATION = re.compile(f"[{VARIATION_SELECTORS}]")
_MONGOLIAN_LETTERS = re.compile("[\u1820-\u18aa]")
# Arabic (with its supplement, extended-A and presentation forms) and the Indic scripts from
# Devanagari to Sinhala.
_JOINING_SCRIPTS = re.compile(
    "[\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff\u0900-\u0dff\ufb50-\ufdff\ufe70-\ufefc]"
)
# Refused besides control and format characters: letters drawn blank (Hangul fillers, the blank
# Braille pattern), which pass for an empty name or hide a space.
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
# Embeddings, overrides and isolates reorder whole runs of a text: named apart when refused.
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Every character refused, as ranges of code points: control characters but tabs and line
# breaks (Cc), format characters but the dropped ones (Cf: embeddings, overrides and isolates,
# invisible operators U+2061-U+2064, tag characters U+E0001 and U+E0020-U+E007F that hide text
# in plain sight, interlinear annotation marks), surrogates, the blank letters and U+FFFD.
# Listed so that one regular expression finds them; tests/test_text_rule.py derives the same
# list from the Unicode database.
REFUSED_RANGES = (
    (0x0000, 0x0008), (0x000B, 0x000C), (0x000E, 0x001F), (0x007F, 0x009F), (0x0600, 0x0605),
    (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2),
    (0x115F, 0x1160), (0x180E, 0x180E), (0x202A, 0x202E), (0x2061, 0x2064),
    (0x2066, 0x206F), (0x2800, 0x2800), (0x3164, 0x3164), (0xD800, 0xDFFF), (0xFFA0, 0xFFA0),
    (0xFFF9, 0xFFFB), (0xFFFD, 0xFFFD), (0x110BD, 0x110BD), (0x110CD, 0x110CD),
    (0x13430, 0x13438), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)  # fmt: skip
_REFUSED = re.compile(
    "[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in REFUSED_RANGES) + "]"
)


class TextError(ValueError):
    """A text that cannot be normalized; the message says why."""


def refusal(char: str) -> str | None:
    """Why the rule refuses ``char`` (tabs and line breaks aside), or None."""
    category = unicodedata.category(char)
    if char == "\ufffd":
        return (
            "contains U+FFFD, the mark of bytes that were not valid UTF-8: send the text as UTF-8"
        )
    if category == "Cc":
        return "contains control characters"
    if char in _BIDI:
        return (
            f"contains bidirectional controls ({_named(char)}), which make a text display "
            "other than it reads"
        )
    if (category == "Cf" and char not in DROPPED) or category == "Cs" or char in _BLANK_LETTERS:
        return f"contains invisible characters ({_named(char)}), which hide what a text says"
    return None


def _named(char: str) -> str:
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X} {name}".rstrip()


def _checked(text: object) -> str:
    """``text`` with the dropped characters removed, or ``TextError`` naming the first refused."""
    if not isinstance(text, str):
        raise TextError("must be a string")
    found = _REFUSED.search(text)
    if found:
        raise TextError(refusal(found.group()))
    text = _JOINER.sub(_joiner_kept_or_dropped, text)
    return _VARIATION.sub(_variation_kept_or_dropped, text).translate(_ALWAYS_DROP)


def _variation_kept_or_dropped(match: re.Match) -> str:
    text, at, selector = match.string, match.start(), match.group()
    before = text[at - 1 : at]
    if selector >= "\ufe00":
        kept = _in_emoji(before) or (before and unicodedata.category(before) == "So")
    else:
        kept = bool(_MONGOLIAN_LETTERS.fullmatch(before))
    return selector if kept else ""


def _joiner_kept_or_dropped(match: re.Match) -> str:
    text, at = match.string, match.start()
    before, after = text[at - 1 : at], text[at + 1 : at + 2]
    if _JOINING_SCRIPTS.fullmatch(before) and _JOINING_SCRIPTS.fullmatch(after):
        return match.group()
    if match.group() == "\u200d" and _in_emoji(before) and _in_emoji(after):
        return match.group()
    return ""


def _in_emoji(char: str) -> bool:
    """A pictograph, or what follows one inside an emoji: the emoji presentation selector and
    the skin tones."""
    return bool(char) and (
        unicodedata.category(char) == "So"
        or char == "\ufe0f"
        or "\U0001f3fb" <= char <= "\U0001f3ff"
    )


# The longest text and comparison key a row stores (``Input``, ``Member``).
STORED_TEXT_LENGTH = 500


def clean_text(text: object, *, max_length: int) -> str:
    """A one-line text as accepted (a title, a member, a name, a code): whitespace collapsed to
    single spaces, the dropped characters removed; or ``TextError`` saying what is wrong. Tabs
    and line breaks count as whitespace."""
    cleaned = _WHITESPACE.sub(" ", _checked(text)).strip()
    if not cleaned:
        raise TextError("is empty")
    if len(cleaned) > max_length:
        raise TextError(f"is longer than {max_length} characters ({len(cleaned)})")
    # Compatibility forms spell out: one "ﷺ" is 18 letters in the key a text is compared by.
    spelled = len(comparison_key(cleaned))
    if spelled > STORED_TEXT_LENGTH:
        raise TextError(
            f"is longer than {STORED_TEXT_LENGTH} characters once its compatibility characters "
            f"are spelled out ({spelled})"
        )
    return cleaned


def clean_multiline_text(text: object, *, max_length: int) -> str:
    """A text of several lines as accepted (a description, a comment, guidelines): the same
    characters refused and dropped as ``clean_text``, line breaks (as ``\\n``) and tabs kept,
    spaces at either end removed. It may be empty: whether it must be is the caller's rule."""
    cleaned = _checked(text).replace("\r\n", "\n").replace("\r", "\n").strip()
    if len(cleaned) > max_length:
        raise TextError(f"is longer than {max_length:,} characters ({len(cleaned):,})")
    return cleaned
