"""Readers for taxonomy files. They parse and validate; they never touch the database.

Each reader returns a ``ParsedTaxonomy`` holding the groups, the member strings and every row it
refused with the reason, so that the import service can reject a file whole or skip the bad rows
on request, and say which rows either way.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import ftfy

from annotations.text_rule import (
    TextError,
    clean_multiline_text,
    clean_text,
    comparison_key,
    spelled_out_forms,
)
from siamweb.csv_cells import spreadsheet_text
from siamweb.uploads import NotUtf8Error, blank_line, separator_advice, utf8_text

CSV_REQUIRED_COLUMNS = ("group_code", "group_name", "text")
ONET_OCCUPATIONS = "Occupation Data.txt"
ONET_ALTERNATES = "Alternate Titles.txt"
ONET_RELATED = "Related Occupations.txt"  # optional
ESCO_OCCUPATIONS = "occupations_en.csv"
MAX_CODE_LENGTH = 64
# What a group's code may not hold or be (group_code_problem says why).
CODE_FORBIDDEN = "/"
CODE_DOT_SEGMENTS = (".", "..")
MAX_NAME_LENGTH = 300
MAX_DESCRIPTION_LENGTH = 5000


class ImportFileError(ValueError):
    """The file as a whole cannot be read: missing, wrong encoding, wrong columns. ``field``:
    the request's field at fault, the file unless the slug or the name is."""

    def __init__(self, message: str, *, field: str = "file") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class RowError:
    location: str  # "file:line"
    reason: str

    def __str__(self) -> str:
        return f"{self.location}: {self.reason}"


@dataclass
class ParsedTaxonomy:
    # code → (name, description); a description None: the file has none, the stored one stays.
    groups: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    members: list[tuple[str, str]] = field(default_factory=list)  # (group code, text)
    relations: list[tuple[str, str]] = field(default_factory=list)  # (group code, related code)
    errors: list[RowError] = field(default_factory=list)
    rows_read: int = 0
    sha256: str = ""


def parse_taxonomy(path: Path, fmt: str, *, max_text_length: int) -> ParsedTaxonomy:
    readers = {"csv": _parse_csv, "onet": _parse_onet, "esco": _parse_esco}
    if fmt not in readers:
        raise ImportFileError(f"unknown format {fmt!r}; choose one of {', '.join(readers)}")
    path = Path(path)
    if not path.exists():
        raise ImportFileError(f"{path} does not exist")
    return readers[fmt](path, max_text_length)


def _decode(path: Path, digest: hashlib._Hash) -> str:
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise ImportFileError(f"{path} is a folder, expected a file") from None
    except OSError as exc:
        raise ImportFileError(f"{path} cannot be read: {exc.strerror}") from None
    digest.update(data)
    try:
        return utf8_text(data, filename=path.name)
    except NotUtf8Error as exc:
        raise ImportFileError(str(exc)) from None


def _rows(
    text: str, name: str, required: Iterable[str], **csv_options
) -> Iterator[tuple[int, dict]]:
    # strict: a quote opened and never closed is an error, not the rest of the file in one field.
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True, **csv_options)
    try:
        columns = reader.fieldnames or []
    except csv.Error as exc:  # the header itself: a quote opened in it and never closed
        raise ImportFileError(f"{name} is not valid CSV{csv_error_text(exc, 0)}") from None
    missing = [c for c in required if c not in columns]
    if missing:
        found = ", ".join(columns) or "none"
        raise ImportFileError(
            f"{name} lacks the column(s) {', '.join(missing)}; it has {found}"
            # O*NET's files are read with tabs: the advice is for files meant as CSV.
            + (separator_advice(columns) if csv_options.get("delimiter", ",") == "," else "")
        )
    ended = 1  # the header's line
    try:
        for row in reader:
            # reader.line_num is the physical line where the record ended (records span lines).
            ended = reader.line_num
            # The fields the line held: DictReader fills in None for those a short line lacks.
            if blank_line([value for value in row.values() if isinstance(value, str)]):
                continue
            yield reader.line_num, row
    except csv.Error as exc:
        raise ImportFileError(f"{name} is not valid CSV{csv_error_text(exc, ended)}") from None


def csv_error_text(exc: csv.Error, last_good_line: int) -> str:
    """A CSV error in words, to follow "is not valid CSV", placed at the record after the last
    one read whole."""
    line = last_good_line + 1
    if "unexpected end of data" in str(exc):
        return f": a quote opened on line {line} is never closed (unexpected end of data)"
    return f" near line {line}: {exc}"


def _repaired(value: str | None) -> str:
    """A text from a taxonomy's file with its mojibake undone (``ftfy.fix_encoding``): ESCO's
    CSV spells the right quote of 18 occupations' "students'" as "â\x80\x99", whose C1 control
    characters the one text rule refuses. Nothing else in a text is changed."""
    return ftfy.fix_encoding(value) if value else ""


def _clean(value: str | None, what: str, max_length: int) -> str:
    try:
        return clean_text(_repaired(value), max_length=max_length)
    except TextError as exc:
        raise TextError(f"{what} {exc}") from None


def group_code_problem(code: str, what: str = "code") -> str:
    """Why a cleaned ``code`` cannot be a group's code, in words naming it; "" when it can.

    A code is one path segment of its group's page (``/taxonomies/<slug>/groups/<code>/``): a
    '/' would split it, and a browser resolves a segment "." or ".." as a step along the path
    before it asks, so such a group's page could never be opened.
    """
    if CODE_FORBIDDEN in code:
        return f"{what} {code!r} may not contain {CODE_FORBIDDEN!r}"
    if code in CODE_DOT_SEGMENTS:
        return (
            f"{what} {code!r} may not be '.' or '..': a browser reads them as steps in an address"
        )
    return ""


def _code(value: str | None, what: str) -> str:
    code = _clean(value, what, MAX_CODE_LENGTH)
    if problem := group_code_problem(code, what):
        raise TextError(problem)
    return code


def _description(value: str | None) -> str:
    """Descriptions are long prose: line breaks and tabs kept (``clean_multiline_text``)."""
    try:
        return clean_multiline_text(_repaired(value), max_length=MAX_DESCRIPTION_LENGTH)
    except TextError as exc:
        raise TextError(f"description {exc}") from None


def _parse_csv(path: Path, max_text_length: int) -> ParsedTaxonomy:
    if path.is_dir():
        raise ImportFileError(f"{path} is a folder; the csv format reads one file")
    digest = hashlib.sha256()
    parsed = ParsedTaxonomy()
    rows = list(_rows(_decode(path, digest), path.name, CSV_REQUIRED_COLUMNS))
    with_text = _codes_with_text(rows)
    for line, row in rows:
        parsed.rows_read += 1
        if None in row:
            parsed.errors.append(RowError(f"{path.name}:{line}", "more fields than columns"))
            continue
        # A cell the export (or a spreadsheet) escaped as '=… is read as the text it holds.
        row = {key: spreadsheet_text(value) if value else value for key, value in row.items()}
        try:
            code = _code(row["group_code"], "group_code")
            name = _clean(row["group_name"], "group_name", MAX_NAME_LENGTH)
            text = None
            if (row["text"] or "").strip():
                text = _clean(row["text"], "text", max_text_length)
            elif code in with_text:
                raise TextError(
                    f"text is empty, but group {code} has strings on other rows (an empty text "
                    "stands for a group without strings, alone on its row)"
                )
            description = _description(row["description"]) if "description" in row else None
        except TextError as exc:
            parsed.errors.append(RowError(f"{path.name}:{line}", str(exc)))
            continue
        known = parsed.groups.get(code)
        if known and known[0] != name:
            parsed.errors.append(
                RowError(
                    f"{path.name}:{line}",
                    f"group_code {code} is named {name!r} here but {known[0]!r} earlier",
                )
            )
            continue
        if not known or (description and not known[1]):
            parsed.groups[code] = (name, description)
        if text is not None:
            parsed.members.append((code, text))
    parsed.sha256 = digest.hexdigest()
    return parsed


def _codes_with_text(rows: list[tuple[int, dict]]) -> set[str]:
    """The codes of the groups that have a string somewhere in the file. A group's only row may
    leave its text empty (how the export writes a group without strings); in a group that has
    strings, an empty text is a slip and refused."""
    codes = set()
    for _, row in rows:
        if not (row.get("text") or "").strip():
            continue
        value = row.get("group_code")
        with contextlib.suppress(TextError):  # such a row is refused for its code
            codes.add(_code(spreadsheet_text(value) if value else value, "group_code"))
    return codes


def _parse_onet(path: Path, max_text_length: int) -> ParsedTaxonomy:
    if not path.is_dir():
        raise ImportFileError(
            f"{path} is not a folder; the onet format reads {ONET_OCCUPATIONS!r} and "
            f"{ONET_ALTERNATES!r} from one"
        )
    digest = hashlib.sha256()
    parsed = ParsedTaxonomy()
    tab = {"delimiter": "\t", "quoting": csv.QUOTE_NONE}
    for filename, title_column in (
        (ONET_OCCUPATIONS, "Title"),
        (ONET_ALTERNATES, "Alternate Title"),
    ):
        file_path = path / filename
        if not file_path.exists():
            raise ImportFileError(f"{path} has no {filename!r}")
        required = ("O*NET-SOC Code", title_column)
        for line, row in _rows(_decode(file_path, digest), filename, required, **tab):
            parsed.rows_read += 1
            location = f"{filename}:{line}"
            try:
                code = _code(row["O*NET-SOC Code"], "O*NET-SOC Code")
                text = _clean(row[title_column], title_column, max_text_length)
            except TextError as exc:
                parsed.errors.append(RowError(location, str(exc)))
                continue
            if filename == ONET_OCCUPATIONS:
                if len(text) > MAX_NAME_LENGTH:
                    parsed.errors.append(RowError(location, "Title is too long for a group name"))
                    continue
                try:
                    description = _description(row["Description"]) if "Description" in row else None
                    parsed.groups[code] = (text, description)
                except TextError as exc:
                    parsed.errors.append(RowError(location, str(exc)))
                    continue
            elif code not in parsed.groups:
                parsed.errors.append(RowError(location, f"unknown occupation code {code}"))
                continue
            parsed.members.append((code, text))
    _add_short_forms(parsed)
    related_path = path / ONET_RELATED
    if related_path.exists():
        required = ("O*NET-SOC Code", "Related O*NET-SOC Code")
        text = _decode(related_path, digest)
        for line, row in _rows(text, ONET_RELATED, required, **tab):
            pair = (row["O*NET-SOC Code"] or "").strip(), (row[required[1]] or "").strip()
            unknown = [code for code in pair if code not in parsed.groups]
            if unknown:
                parsed.errors.append(
                    RowError(f"{ONET_RELATED}:{line}", f"unknown occupation code {unknown[0]!r}")
                )
            elif pair[0] != pair[1]:
                parsed.relations.append(pair)
    parsed.sha256 = digest.hexdigest()
    return parsed


def _add_short_forms(parsed: ParsedTaxonomy) -> None:
    """O*NET writes 2,238 alternate titles as "Long Form (Abbreviation)" ("Emergency Room
    Registered Nurse (ER RN)"): the shorter form is a member of its group too, where the group
    has no such member yet. Job ads write the short form ("Travel RN"); inside the long one its
    few characters weigh little against the rest. bench/spelled_out_members.py measures it:
    the demo's nurse titles answered right or second, vacancy and clean titles within their
    intervals."""
    keys = {(code, comparison_key(text)) for code, text in parsed.members}
    for code, text in list(parsed.members):
        forms = spelled_out_forms(text)
        if not forms:
            continue
        short = min(forms, key=len)
        if (code, comparison_key(short)) not in keys:
            keys.add((code, comparison_key(short)))
            parsed.members.append((code, short))


def _parse_esco(path: Path, max_text_length: int) -> ParsedTaxonomy:
    if path.is_dir():
        path = path / ESCO_OCCUPATIONS
        if not path.exists():
            raise ImportFileError(f"{path.parent} has no {ESCO_OCCUPATIONS!r}")
    digest = hashlib.sha256()
    parsed = ParsedTaxonomy()
    required = ("conceptUri", "preferredLabel", "altLabels")
    for line, row in _rows(_decode(path, digest), path.name, required):
        parsed.rows_read += 1
        location = f"{path.name}:{line}"
        # ESCO occupations have no short code: the URI's last segment is stable and unique.
        code = (row["conceptUri"] or "").rstrip("/").rsplit("/", 1)[-1]
        try:
            code = _code(code, "conceptUri")
            name = _clean(row["preferredLabel"], "preferredLabel", MAX_NAME_LENGTH)
            description = _description(row["description"]) if "description" in row else None
        except TextError as exc:
            parsed.errors.append(RowError(location, str(exc)))
            continue
        parsed.groups[code] = (name, description)
        try:  # a group's name may be longer than a member's text
            parsed.members.append((code, _clean(name, "preferredLabel", max_text_length)))
        except TextError as exc:
            parsed.errors.append(RowError(location, str(exc)))
        for label in (row["altLabels"] or "").split("\n"):
            if not label.strip():
                continue
            try:
                parsed.members.append((code, _clean(label, "altLabel", max_text_length)))
            except TextError as exc:
                parsed.errors.append(RowError(location, str(exc)))
    parsed.sha256 = digest.hexdigest()
    return parsed
