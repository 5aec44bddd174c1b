"""A bulk job's files: its input read a record at a time (CSV or text, from any byte offset) or
cut into chunks of whole records, and the rows and cells of its result files.

The job itself (creating, cancelling, retrying) is ``models_app.bulk.jobs``; carrying it out,
``models_app.bulk.run``.
"""

from __future__ import annotations

import codecs
import csv
import io
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from annotations.text_rule import TextError, clean_text
from models_app.models import BulkJob
from models_app.serving.engines import artifact_path
from models_app.serving.normalize import Normalization
from siamweb.csv_cells import spreadsheet_cell
from siamweb.humanize import format_size

BULK_FORMATS = {".csv": BulkJob.Format.CSV, ".txt": BulkJob.Format.TEXT}
TEXT_COLUMN = "text"  # the column of a text file, and a CSV's column when none is named
RESULT_COLUMNS = [
    "group_code",
    "group_name",
    "score",
    "probability",
    "auto_coded",
    "low_confidence",
    "tied",
    "none_of_these",
    "matched_member",
    "source",
    "model_version",
    "runner_up_code",
    "runner_up_name",
    "runner_up_score",
    "margin",
    "error",
]
INPUT_FILE = "input"
RESULT_FILES = {"csv": "result.csv", "jsonl": "result.jsonl"}
CHUNKS_DIR = "chunks"  # each chunk's results, until they are joined into the result files

_UTF8_BOM = codecs.BOM_UTF8
_QUOTE, _COMMA = ord('"'), ord(",")
# The longest record (a CSV row, a line of text) a bulk job reads: no title comes near it.
MAX_RECORD_BYTES = 1024 * 1024
# A number stays as it is in a result cell: "-5" reads as minus five, not as a formula. ASCII
# digits only: \d takes every script's digits, and "-\uff15" is no number a spreadsheet reads.
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


class BulkFileError(ValueError):
    """The file cannot be normalized as a whole; the message says why and where."""


# --- reading the input ----------------------------------------------------------------------


@dataclass(frozen=True)
class Record:
    end: int  # the byte offset just past this record: where a resumed job reads on from
    line: int  # the physical line the record starts on, 1-based
    next_line: int  # the line the next record starts on
    fields: list[str]
    # Why the row cannot be read as written (bytes that are not UTF-8, broken CSV quoting): one
    # bad row in a file of millions is kept with the reason, it does not fail the job.
    problem: str = ""


def _decoded(raw: bytes, *, offset: int) -> tuple[str, str]:
    """A record's text, and what is wrong with its bytes: those that are not UTF-8 are kept
    written as ``\\xNN``, so the row's cells still say what the file held."""
    try:
        return raw.decode("utf-8"), ""
    except UnicodeDecodeError as exc:
        bad = raw[exc.start : exc.start + 4]
        return raw.decode("utf-8", errors="backslashreplace"), (
            f"not UTF-8 (byte {offset + exc.start:,} holds {bad!r}; shown as \\xNN)"
        )


def _csv_fields(text: str, *, filename: str, line: int) -> tuple[list[str], str]:
    """A CSV record's fields, and what is wrong with its quoting: a stray quote is read as a
    spreadsheet would read it, and said."""
    problem = ""
    try:
        rows = list(csv.reader(io.StringIO(text), strict=True))
    except csv.Error as exc:
        problem = f"not valid CSV ({exc})"
        try:
            rows = list(csv.reader(io.StringIO(text)))
        except csv.Error as unreadable:
            # No reading of its cells can be trusted: the row is kept whole, in the first column.
            return [text.rstrip("\r\n")], (
                f"not valid CSV ({_csv_unreadable(unreadable)}); the row is kept whole in the "
                "first column"
            )
    if len(rows) > 1:  # a record boundary read otherwise than csv reads it: never drop
        raise BulkFileError(
            f"{filename} is not valid CSV near line {line}: one line read as {len(rows)} rows"
        )
    return (rows[0] if rows else []), problem


def _csv_unreadable(error: csv.Error) -> str:
    """What csv could not read, in a curator's words (its own name the rest)."""
    if "field limit" in str(error):  # a process-wide limit: raising it would change every reader
        return f"a field over {csv.field_size_limit():,} characters"
    if "new-line character" in str(error):
        return (
            "a carriage return inside an unquoted field: do its lines end in a bare CR? save "
            "the file with LF or CRLF line ends"
        )
    return str(error)


def still_quoted(line: bytes, quoted: bool) -> bool:
    """Whether a CSV record is inside a quoted field at the end of ``line``, given whether it
    was at its start. As Python's csv reads a record: a quote opens a field only as its first
    character (the quote of ``5" pipe fitter`` is text), and inside a quoted field two quotes
    stand for one while a single quote closes it."""
    if b'"' not in line:
        return quoted
    at_field_start = not quoted  # a line outside quotes starts a record
    position, size = 0, len(line)
    while position < size:
        byte = line[position]
        if quoted:
            if byte == _QUOTE:
                if position + 1 < size and line[position + 1] == _QUOTE:
                    position += 2
                    continue
                quoted = False
        elif byte == _QUOTE and at_field_start:
            quoted, at_field_start = True, False
        else:
            at_field_start = byte == _COMMA
        position += 1
    return quoted


def _raw_records(
    handle: IO[bytes], *, fmt: str, filename: str, offset: int, line: int
) -> Iterator[tuple[bytes, int, int]]:
    """Each record's bytes from byte ``offset`` on (a record's start), with the line it starts
    on and the line the next one starts on: the one place a record's end is decided, for the
    reader and the split alike."""
    handle.seek(offset)
    if offset == 0 and handle.read(3) != _UTF8_BOM:
        handle.seek(0)
    csv_format = fmt == BulkJob.Format.CSV
    while True:
        start_line, pieces, size, quoted = line, [], 0, False
        while True:
            raw = handle.readline(MAX_RECORD_BYTES + 1 - size)
            if not raw:
                break
            size += len(raw)
            if size > MAX_RECORD_BYTES:
                raise BulkFileError(
                    f"{filename}: the row starting on line {start_line} is over "
                    f"{format_size(MAX_RECORD_BYTES)}"
                    + (", or a quote opened there is never closed" if quoted else "")
                )
            line += 1
            pieces.append(raw)
            quoted = csv_format and still_quoted(raw, quoted)
            if not quoted:
                break
        if not pieces:
            return
        if quoted:
            raise BulkFileError(
                f"{filename} is not valid CSV: a quote opened on line {start_line} is never "
                "closed (unexpected end of data)"
            )
        yield (pieces[0] if len(pieces) == 1 else b"".join(pieces)), start_line, line


def read_records(
    handle: IO[bytes], *, fmt: str, filename: str, offset: int, line: int = 1
) -> Iterator[Record]:
    """The records of ``handle`` from byte ``offset`` on (a record's start), one at a time.

    Bytes are read a line at a time, so a file of any size is read in bounded memory and each
    record knows the offset it ends at. A CSV record ends at a newline outside a quoted field
    (``still_quoted``). A record over ``MAX_RECORD_BYTES`` is refused: read on, an unclosed
    quote or a file with no newline would gather the rest of the file into memory.
    """
    records = _raw_records(handle, fmt=fmt, filename=filename, offset=offset, line=line)
    position = None
    for raw, start_line, next_line in records:
        if position is None:
            position = handle.tell() - len(raw)  # past a byte-order mark at the very start
        text, problem = _decoded(raw, offset=position)
        position += len(raw)
        if fmt == BulkJob.Format.CSV:
            fields, csv_problem = _csv_fields(text, filename=filename, line=start_line)
            problem = problem or csv_problem
        else:
            fields = [text.rstrip("\r\n")]
        yield Record(
            end=position, line=start_line, next_line=next_line, fields=fields, problem=problem
        )


@dataclass(frozen=True)
class Span:
    """Consecutive whole records of the input: a chunk of a bulk job."""

    offset: int  # the byte its first record starts at
    end: int  # the byte just past its last record
    line: int  # the line its first record starts on
    next_line: int  # the line the record after it starts on
    rows: int


def record_spans(
    handle: IO[bytes], *, fmt: str, filename: str, offset: int, line: int, rows: int
) -> Iterator[Span]:
    """The input from byte ``offset`` on, cut into spans of ``rows`` records (the last may hold
    fewer). Records end where ``read_records`` ends them, so a quoted field with a newline is
    never cut; their bytes are neither decoded nor parsed, and only one record is held at a
    time."""
    records = _raw_records(handle, fmt=fmt, filename=filename, offset=offset, line=line)
    start, start_line, count, position, next_line = None, line, 0, offset, line
    for raw, record_line, next_line in records:
        if start is None:
            start, start_line = handle.tell() - len(raw), record_line
            position = start
        position += len(raw)
        count += 1
        if count == rows:
            yield Span(offset=start, end=position, line=start_line, next_line=next_line, rows=count)
            start, count = None, 0
    if count:
        yield Span(offset=start, end=position, line=start_line, next_line=next_line, rows=count)


def read_header(path: Path, *, fmt: str, filename: str) -> tuple[list[str], int, int]:
    """The input's columns, and the byte offset and line its first data row starts at."""
    if fmt != BulkJob.Format.CSV:
        with path.open("rb") as handle:
            bom = 3 if handle.read(3) == _UTF8_BOM else 0
        return [TEXT_COLUMN], bom, 1
    with path.open("rb") as handle:
        first = next(read_records(handle, fmt=fmt, filename=filename, offset=0), None)
    if first is not None and first.problem:
        raise BulkFileError(f"{filename}: its header row is {first.problem}")
    if first is None or not any(name.strip() for name in first.fields):
        raise BulkFileError(f"{filename} has no header row naming its columns")
    return first.fields, first.end, first.next_line


def _column_name(name: str) -> str | None:
    """A header's name as a typed column name is kept (``clean_text``: spaces collapsed, the
    characters the text rule drops dropped), so a name the page lists can be chosen; None
    when no typed name could match it."""
    try:
        return clean_text(name, max_length=len(name) + 1)
    except TextError:
        return None


def column_position(columns: list[str], column: str, *, filename: str) -> int:
    """Where the header names ``column`` (compared as typed names are kept, ``_column_name``);
    ``BulkFileError`` when it does not, or names it more than once."""
    found = [position for position, name in enumerate(columns) if _column_name(name) == column]
    if not found:
        raise BulkFileError(
            f"{filename} has no column {column!r}; its columns are "
            + ", ".join(repr(name) for name in columns)
        )
    if len(found) > 1:
        places = ", ".join(str(position + 1) for position in found)
        raise BulkFileError(
            f"{filename} names the column {column!r} {len(found)} times (columns {places}); "
            "rename all but one, or normalize another column"
        )
    return found[0]


def input_keys(columns: list[str]) -> list[str]:
    """The input's column names as the keys of a JSON object: a name the header repeats or
    leaves empty gets its position, so no cell overwrites another."""
    renamed = {name for name in columns if not name or columns.count(name) > 1}
    taken = {name for name in columns if name not in renamed}
    keys = []
    for position, name in enumerate(columns, start=1):
        key = name
        if name in renamed:
            key = f"{name} (column {position})" if name else f"column {position}"
            while key in taken:  # a header that already names a column so
                key = f"{key} (column {position})"
            taken.add(key)
        keys.append(key)
    return keys


def row_problem(record: Record, width: int) -> str:
    """Why a row is not normalized as read, or "": its bytes or quoting are broken, or it has
    more fields than the header (an unquoted comma in a title shifts the columns after it).
    Empty extra fields, a trailing comma say, are nothing lost."""
    problems = [record.problem] if record.problem else []
    extra = record.fields[width:]
    if any(extra):
        problems.append(
            f"the row has {len(record.fields)} fields where the header has {width}, so its "
            f"columns may be shifted; the extra ones were {', '.join(map(repr, extra))}"
        )
    return "; ".join(problems)


# --- writing the results --------------------------------------------------------------------


def answer_chance(answer: Normalization) -> float:
    """The top group's chance of being right, as the card shows it (of an answer that offers a
    group): its probability when the ranker gives one, else the ranking's score (a ranker not
    calibrated yet)."""
    return answer.probability if answer.probability is not None else answer.groups[0].score


def answer_margin(answer: Normalization) -> float | None:
    """How far the top group leads the runner-up, in what orders them: the probabilities (the
    card's figures) when the ranker gives them, else the ranking's scores. Never negative: a
    runner-up may have the higher similarity, which is why the similarities' difference was."""
    if len(answer.groups) < 2:
        return None
    top, runner_up = answer.groups[0], answer.groups[1]
    if top.probability is not None and runner_up.probability is not None:
        return max(0.0, round(top.probability - runner_up.probability, 4))
    return max(0.0, round(top.score - runner_up.score, 4))


def result_row(
    answer: Normalization | None, error: str, *, auto_coding_threshold: float | None = None
) -> dict:
    """One row's result columns; ``auto_coded`` when the model's answer reaches the job's
    auto-coding threshold (None: auto-coding was off when the job started)."""
    top = answer.groups[0] if answer is not None and answer.groups else None
    runner_up = answer.groups[1] if answer is not None and len(answer.groups) > 1 else None
    if answer is not None and answer.none_of_these:
        error = ""  # the curators' answer: none of the groups fits this text
    elif answer is not None and top is None:
        error = "no group to offer (every group was rejected for this text)"
    return {
        "group_code": top.code if top else "",
        "group_name": top.name if top else "",
        "score": top.score if top else None,
        "probability": answer.probability if answer is not None else None,
        "auto_coded": answer_auto_coded(answer, auto_coding_threshold),
        "low_confidence": answer.low_confidence if answer is not None else None,
        "tied": answer.tied if answer is not None else None,
        "none_of_these": answer.none_of_these if answer is not None else None,
        "matched_member": top.member if top else "",
        "source": top.source if top else (answer.source if answer is not None else ""),
        "model_version": answer.model_version if answer is not None else "",
        "runner_up_code": runner_up.code if runner_up else "",
        "runner_up_name": runner_up.name if runner_up else "",
        "runner_up_score": runner_up.score if runner_up else None,
        "margin": answer_margin(answer) if answer is not None else None,
        "error": error,
    }


def answer_auto_coded(answer: Normalization | None, threshold: float | None) -> bool:
    """Whether the model's own answer reaches the auto-coding threshold."""
    return (
        threshold is not None
        and answer is not None
        and answer.source == "model"
        and answer.probability is not None
        and answer.probability >= threshold
    )


def csv_cell(value) -> str:
    """A CSV cell a spreadsheet shows as text: one starting like a formula gets a quote mark
    in front (OWASP's advice for CSV injection); numbers are left as they are."""
    if value is None:
        return ""
    text = str(value)
    return text if _NUMBER.fullmatch(text) else spreadsheet_cell(text)


def chunk_files(index: int, attempt: int) -> dict[str, str]:
    """The names, under the job's ``CHUNKS_DIR``, of one attempt at a chunk's results: each
    attempt writes its own, and the one the chunk was done by is the one joined."""
    return {kind: f"{index:07d}.{attempt}.{kind}" for kind in RESULT_FILES}


def remove_partial(job: BulkJob) -> None:
    """Delete whatever results a job has (its chunks' and its own, whole or partial); the upload
    stays."""
    folder = artifact_path(job.folder)
    shutil.rmtree(folder / CHUNKS_DIR, ignore_errors=True)
    for name in RESULT_FILES.values():
        (folder / name).unlink(missing_ok=True)
        for part in folder.glob(f"{name}.*part"):
            part.unlink(missing_ok=True)
