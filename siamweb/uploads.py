"""What every uploaded file is put through, whichever area takes it (a taxonomy, a file of inputs,
a bulk job): copied with a cap on its size, its bytes read as UTF-8 text by one rule, what a
blank line is, and a CSV header that uses another separator than commas."""

from __future__ import annotations

import codecs
from typing import IO

# An upload is copied in pieces this big, so a file of any size passes through bounded memory.
_COPY_PIECE_BYTES = 1024 * 1024

# A file that opens with one of these is UTF-16, as a spreadsheet's "Unicode text" saves it.
_UTF16_MARKS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


class NotUtf8Error(ValueError):
    """The bytes of ``filename`` are not UTF-8 text. ``start`` is the offset of the first byte
    that is not (0 when the file is UTF-16), ``line`` the line it stands on."""

    def __init__(self, data: bytes, start: int, *, filename: str, utf16: bool = False) -> None:
        self.start = start
        self.line = data[:start].count(b"\n") + 1
        self.utf16 = utf16
        fault = f"is not UTF-8 text (invalid byte at line {self.line})"
        if utf16:
            fault = "is UTF-16 text"
        super().__init__(f"{filename} {fault}; save it as UTF-8")


def utf8_text(data: bytes, *, filename: str, complete: bool = True) -> str:
    """``data`` read as UTF-8, a byte-order mark in front dropped (spreadsheets write one);
    ``NotUtf8Error`` says where it is not. ``complete=False``: the head of a longer file, which
    may end inside a character."""
    if data.startswith(_UTF16_MARKS):
        raise NotUtf8Error(data, 0, filename=filename, utf16=True)
    try:
        # Plain UTF-8 rather than "utf-8-sig", whose error offsets do not count the mark.
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=complete)
    except UnicodeDecodeError as exc:
        raise NotUtf8Error(data, exc.start, filename=filename) from None
    return text.removeprefix("\ufeff")


def blank_line(fields: list[str]) -> bool:
    """Whether a record a reader split into ``fields`` is a blank line: at most one field, of
    nothing but whitespace. It holds no row, so a reader of inputs or of a taxonomy leaves it out
    and loses nothing; "  ,  " is a row whose fields are empty, and reported as one. (A bulk job
    keeps it: each row of its result stands where its input's row stood.)"""
    return len(fields) <= 1 and not "".join(fields).strip()


def other_separator(header: list[str]) -> str | None:
    """What a CSV header read with commas seems separated by instead ("semicolons", "tabs"), or
    None: spreadsheets in many locales save "CSV" with semicolons, and such a header reads as
    one column whose name holds them all."""
    if len(header) != 1:
        return None
    for separator, name in ((";", "semicolons"), ("\t", "tabs")):
        if separator in header[0]:
            return name
    return None


def separator_advice(header: list[str]) -> str:
    """``other_separator`` as the end of a refusal ("" when the header uses commas)."""
    found = other_separator(header)
    if found is None:
        return ""
    return f"; its header row seems separated by {found}: save the file as comma-separated CSV"


def copy_capped(source: IO[bytes], out: IO[bytes], *, limit: int) -> int:
    """Copy ``source`` into ``out``, stopping before the first piece that would take it past
    ``limit`` bytes; the bytes read, more than ``limit`` when it stopped short. What is read is
    counted, not what the source declares: an upload's or a zip member's stated size can lie."""
    copied = 0
    while piece := source.read(_COPY_PIECE_BYTES):
        copied += len(piece)
        if copied > limit:
            break
        out.write(piece)
    return copied
