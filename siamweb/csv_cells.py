"""CSV cells a spreadsheet shows as text (CSV injection, OWASP): a cell that starts like a formula
is written with an apostrophe in front, and the csv importer reads that apostrophe back off, so an
export imported again gives the same strings. This is the one guard: every CSV the product writes
(a taxonomy's export, a bulk job's results) passes its cells through ``spreadsheet_cell``.

A text that already starts with apostrophes before a formula gets one more, so the two functions
are exact inverses on every string.
"""

from __future__ import annotations

import re
import unicodedata

# A spreadsheet runs a cell that starts with one of these as a formula. Excel, LibreOffice and
# Google Sheets read the full-width and small forms, and the minus sign, as the ASCII ones.
FORMULA_START = (
    "=", "+", "-", "@",
    "\uff1d", "\uff0b", "\uff0d", "\uff20",  # full-width = + - @
    "\ufe66", "\ufe62", "\ufe63", "\ufe6b",  # small = + - @
    "\u2212",  # the minus sign
)  # fmt: skip
# A cell that starts with one of these is suspect whatever follows.
CONTROL_START = ("\t", "\r", "\n")
# Characters that show nothing, which a spreadsheet passes over before the formula: Hangul
# fillers (letters drawn blank). Spaces of every kind (str.isspace: NBSP, U+3000, U+2028) and
# format characters (zero-width space, byte-order mark, soft hyphen, direction marks) are
# passed over by their kind.
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")
# Dynamic data exchange: `cmd|' /C calc'!A0` starts a program in spreadsheets that allow DDE,
# with or without a formula sign in front of it.
_DDE = re.compile(r"\|.*!", re.S)


def _shows_nothing(char: str) -> bool:
    # A mark with no letter before it (a variation selector, the combining grapheme joiner)
    # shows nothing either: a spreadsheet still reads the = after it as a formula.
    category = unicodedata.category(char)
    return char.isspace() or category in ("Cf", "Mn") or char in _BLANK_LETTERS


def _formula_like(text: str) -> bool:
    text = text.lstrip("'")
    if text.startswith(CONTROL_START) or _DDE.search(text):
        return True
    first = next((char for char in text if not _shows_nothing(char)), "")
    return first in FORMULA_START


def spreadsheet_cell(text: str) -> str:
    """``text`` as a CSV cell no spreadsheet runs."""
    return "'" + text if _formula_like(text) else text


def spreadsheet_text(cell: str) -> str:
    """The text a cell written by ``spreadsheet_cell`` (or typed as '=… in a spreadsheet) holds."""
    return cell[1:] if cell.startswith("'") and _formula_like(cell[1:]) else cell
