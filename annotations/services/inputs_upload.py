"""Inputs in from people: a file of raw texts uploaded by a curator, and single texts sent from
the playground. Parsing never touches the database; storing goes through ``inputs_submit`` so
that uploaded texts are predicted and queued exactly like the ones the API sends.

File formats (stated on the upload page too):
- ``.csv``: UTF-8 (a byte-order mark is fine), comma-separated, a header row naming a ``text``
  column; other columns are ignored.
- ``.txt``: UTF-8, one text per line, no header.

A blank line (nothing but whitespace) is no row in either: it holds no input, so leaving it out
loses nothing; the report counts them.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet

from annotations.importers import csv_error_text
from annotations.models import Input, ReviewItem, Taxonomy
from annotations.services.audit import audit_record
from annotations.services.review.inputs import inputs_submit
from annotations.text_rule import TextError, clean_text, comparison_key
from siamweb.humanize import format_size
from siamweb.uploads import NotUtf8Error, blank_line, separator_advice, utf8_text

# Upload limits: a file is read into memory and stored in one transaction, within one request,
# so its rows are capped to what a request can store before a proxy gives up on it
# (docs/decisions/performance-choices.md). Settings SIAMWEB_UPLOAD_MAX_BYTES / _ROWS override.
# inputs_submit predicts a chunk in one call to the engine; this bounds its memory.
UPLOAD_CHUNK_SIZE = 500
# The page lists this many rejected rows; the count says how many there were in all.
UPLOAD_ERRORS_SHOWN = 100

CSV_TEXT_COLUMN = "text"
UPLOAD_FORMATS = (".csv", ".txt")
# What a row reader yields for a blank line: no row, only counted.
BLANK = object()


def upload_max_bytes() -> int:
    return settings.SIAMWEB_UPLOAD_MAX_BYTES


def upload_max_rows() -> int:
    return settings.SIAMWEB_UPLOAD_MAX_ROWS


class UploadFileError(ValueError):
    """The file as a whole cannot be used: wrong format, encoding or columns, too big, empty."""


@dataclass(frozen=True)
class UploadRowError:
    line: int  # physical line in the file, 1-based, where the row starts
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


@dataclass
class ParsedUpload:
    texts: list[str] = field(default_factory=list)  # the good rows, cleaned, in file order
    errors: list[UploadRowError] = field(default_factory=list)
    rows_read: int = 0  # blank lines are not rows
    blank_lines: int = 0


class UploadRejected(Exception):
    """The file has bad rows, and skipping them was not asked for or would leave nothing to
    store: nothing was stored. ``parsed.errors`` lists each bad row with its reason."""

    def __init__(self, parsed: ParsedUpload) -> None:
        self.parsed = parsed
        bad = f"{len(parsed.errors)} of {parsed.rows_read} rows are bad; nothing was stored"
        super().__init__(bad if parsed.texts else f"no row is usable: {bad}")


# --- parsing --------------------------------------------------------------------------------


def parse_inputs_file(*, data: bytes, filename: str) -> ParsedUpload:
    """Read the texts of an uploaded file and every row refused, with its line and reason.

    Raises ``UploadFileError`` when the file cannot be used at all.
    """
    suffix = "." + filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
    if suffix not in UPLOAD_FORMATS:
        raise UploadFileError(
            f"{filename or 'the file'} is neither a .csv nor a .txt file; upload a CSV with a "
            f"{CSV_TEXT_COLUMN!r} column or a text file with one text per line"
        )
    limit = upload_max_bytes()
    if len(data) > limit:
        raise UploadFileError(
            f"{filename} is {format_size(len(data))}; files up to {format_size(limit)} are "
            f"accepted, split it into smaller files"
        )
    try:
        text = utf8_text(data, filename=filename)
    except NotUtf8Error as exc:
        raise UploadFileError(str(exc)) from None
    rows = _csv_rows(text, filename) if suffix == ".csv" else _lines(text)
    parsed = ParsedUpload()
    max_rows, max_length = upload_max_rows(), settings.SIAMWEB_MAX_TEXT_LENGTH
    for line, value in rows:
        if value is BLANK:
            parsed.blank_lines += 1
            continue
        parsed.rows_read += 1
        if parsed.rows_read > max_rows:
            raise UploadFileError(
                f"{filename} has more than {max_rows:,} rows; split it into files of at most "
                f"{max_rows:,} rows"
            )
        if isinstance(value, UploadRowError):
            parsed.errors.append(value)
            continue
        try:
            parsed.texts.append(clean_text(value, max_length=max_length))
        except TextError as exc:
            parsed.errors.append(UploadRowError(line, f"{CSV_TEXT_COLUMN} {exc}"))
    if parsed.rows_read == 0:
        raise UploadFileError(f"{filename} holds no rows")
    return parsed


# A line ends as Windows, Unix or the old Mac (and Excel's "CSV (Macintosh)") end it: a bare
# CR split on nothing would join a file's texts into one.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _lines(text: str) -> Iterator[tuple[int, object]]:
    """One text per line."""
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "":  # what follows the last line's break is no line
        lines.pop()
    for number, line in enumerate(lines, start=1):
        yield number, BLANK if blank_line([line]) else line


def _csv_rows(text: str, filename: str) -> Iterator[tuple[int, object]]:
    # strict: a quote opened and never closed is an error, not the rest of the file in one field.
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    start = 1  # the line the record being read starts on, for a CSV error's place
    try:
        for header in reader:
            if not blank_line(header):
                break
            yield reader.line_num, BLANK
            start = reader.line_num + 1
        else:
            raise UploadFileError(f"{filename} is empty; it needs a header row with a text column")
        columns = [name.strip().lower() for name in header]
        if CSV_TEXT_COLUMN not in columns:
            found = ", ".join(repr(name.strip()) for name in header if name.strip()) or "none"
            raise UploadFileError(
                f"{filename} lacks a {CSV_TEXT_COLUMN!r} column in its header row; it has {found}"
                + separator_advice(header)
            )
        position = columns.index(CSV_TEXT_COLUMN)
        start = reader.line_num + 1
        for row in reader:
            line, start = start, reader.line_num + 1  # a quoted field may span lines
            if blank_line(row):
                yield line, BLANK
            elif len(row) > len(columns):
                yield (
                    line,
                    UploadRowError(
                        line,
                        f"{len(row)} fields but the header names {len(columns)} "
                        f"(an unquoted comma?)",
                    ),
                )
            elif len(row) <= position:
                yield line, UploadRowError(line, f"no {CSV_TEXT_COLUMN} field in this row")
            else:
                yield line, row[position]
    except csv.Error as exc:
        raise UploadFileError(
            f"{filename} is not valid CSV{csv_error_text(exc, start - 1)}"
        ) from None


# --- storing --------------------------------------------------------------------------------


@dataclass
class UploadReport:
    taxonomy: Taxonomy
    filename: str
    rows_read: int = 0
    new_inputs: int = 0
    # Inputs known before the upload: each counts one more occurrence.
    repeated_inputs: int = 0
    # Rows repeating an earlier row of the same file: one upload counts a text once, as one API
    # request does.
    duplicate_rows: int = 0
    blank_lines: int = 0
    rejected: list[UploadRowError] = field(default_factory=list)

    @property
    def stored(self) -> int:
        return self.new_inputs + self.repeated_inputs

    def as_dict(self) -> dict:
        return {
            "filename": self.filename,
            "rows_read": self.rows_read,
            "new_inputs": self.new_inputs,
            "repeated_inputs": self.repeated_inputs,
            "duplicate_rows": self.duplicate_rows,
            "blank_lines": self.blank_lines,
            "rejected_rows": len(self.rejected),
        }


@transaction.atomic
def inputs_upload(
    *,
    taxonomy: Taxonomy,
    parsed: ParsedUpload,
    filename: str,
    user,
    skip_bad_rows: bool = False,
) -> UploadReport:
    """Store the good rows of a parsed file as inputs, predicted and queued for review.

    All or nothing: with bad rows and no ``skip_bad_rows``, or no good row, nothing is stored
    (``UploadRejected``), and without a live model nothing is stored either (``NoLiveModel``
    from ``inputs_submit``, raised before the first write), nor when ``user`` would have more
    items waiting than one may (``ReviewQueueFull``).
    """
    # Every row bad: the rows and their reasons say why, whether skipping was asked for or not.
    if parsed.errors and (not skip_bad_rows or not parsed.texts):
        raise UploadRejected(parsed)
    unique: dict[str, str] = {}
    for text in parsed.texts:
        unique.setdefault(comparison_key(text), text)
    report = UploadReport(
        taxonomy=taxonomy,
        filename=filename,
        rows_read=parsed.rows_read,
        duplicate_rows=len(parsed.texts) - len(unique),
        blank_lines=parsed.blank_lines,
        rejected=parsed.errors,
    )
    keys = list(unique)
    for begin in range(0, len(keys), UPLOAD_CHUNK_SIZE):
        chunk = keys[begin : begin + UPLOAD_CHUNK_SIZE]
        known = Input.objects.filter(taxonomy=taxonomy, normalized_text__in=chunk).count()
        inputs_submit(
            taxonomy=taxonomy,
            texts=[unique[key] for key in chunk],
            source=Input.Source.UPLOAD,
            queued_by=user,
        )
        report.repeated_inputs += known
        report.new_inputs += len(chunk) - known
    audit_record(
        actor=user, action="inputs.upload", obj=taxonomy, taxonomy=taxonomy, after=report.as_dict()
    )
    return report


@dataclass(frozen=True)
class PlaygroundSubmission:
    item: ReviewItem
    created: bool  # a new input, rather than one more occurrence of a known one


@transaction.atomic
def input_send_to_review(*, taxonomy: Taxonomy, text: str, user) -> PlaygroundSubmission:
    """Store one playground text as an input and queue it, on a curator's explicit request."""
    known = Input.objects.filter(taxonomy=taxonomy, normalized_text=comparison_key(text)).exists()
    (item,) = inputs_submit(
        taxonomy=taxonomy, texts=[text], source=Input.Source.PLAYGROUND, queued_by=user
    )
    audit_record(
        actor=user,
        action="input.submit",
        obj=item.input,
        taxonomy=taxonomy,
        after={"text": item.input.text, "source": Input.Source.PLAYGROUND, "created": not known},
    )
    return PlaygroundSubmission(item=item, created=not known)


# --- reading (the inputs list) --------------------------------------------------------------


INPUTS_PAGE_SIZE = 50


def inputs_recent(
    *,
    taxonomy: Taxonomy | None = None,
    query: str = "",
    before: int | None = None,
    limit: int = INPUTS_PAGE_SIZE,
) -> QuerySet[Input]:
    """Newest inputs first, keyset-paginated on id: a deep page costs what the first one does.

    The review item, its prediction and predicted group come in the same query; nothing is
    counted.
    """
    inputs = Input.objects.all()
    if taxonomy is not None:
        inputs = inputs.filter(taxonomy=taxonomy)
    if query:
        inputs = inputs.filter(normalized_text__contains=comparison_key(query))
    if before is not None:
        inputs = inputs.filter(id__lt=before)
    return inputs.select_related(
        "taxonomy", "review_item__top_group", "review_item__prediction"
    ).order_by("-id")[:limit]
