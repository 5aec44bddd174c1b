"""CSV cells a spreadsheet shows as text (CSV injection, OWASP): a cell that starts like a formula
is written with an apostrophe in front, and the csv importer reads that apostrophe back off, so an
export imported again gives the same strings.

A text that already starts with apostrophes before a formula character gets one more, so the two
functions are exact inverses on every string.
"""

from __future__ import annotations

# A spreadsheet runs a cell that starts with one of these as a formula, after any spaces or line
# breaks in front of it, and some read the full-width forms as the ASCII ones.
FORMULA_START = ("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20")
# A cell that starts with one of these is suspect whatever follows.
CONTROL_START = ("\t", "\r", "\n")


def _formula_like(text: str) -> bool:
    text = text.lstrip("'")
    return text.startswith(CONTROL_START) or text.lstrip(" \t\r\n").startswith(FORMULA_START)


def spreadsheet_cell(text: str) -> str:
    """``text`` as a CSV cell no spreadsheet runs."""
    return "'" + text if _formula_like(text) else text


def spreadsheet_text(cell: str) -> str:
    """The text a cell written by ``spreadsheet_cell`` (or typed as '=… in a spreadsheet) holds."""
    return cell[1:] if cell.startswith("'") and _formula_like(cell[1:]) else cell
