"""Spreadsheet-safe CSV cells: escaping and reading back are exact inverses."""

from __future__ import annotations

import pytest

from siamweb.csv_cells import spreadsheet_cell, spreadsheet_text


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("=cmd|' /C calc'!A0", "'=cmd|' /C calc'!A0"),
        ("+1", "'+1"),
        ("-2", "'-2"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        # Spaces or a line break before the formula, and full-width signs, run as well.
        (" =1+1", "' =1+1"),
        ("\n=HYPERLINK(1)", "'\n=HYPERLINK(1)"),
        ("\uff1d1+1", "'\uff1d1+1"),
        ("  \uff20SUM(A1)", "'  \uff20SUM(A1)"),
        # Marks that show nothing before it: the formula still runs.
        ("\u034f=1+1", "'\u034f=1+1"),
        ("\ufe0f\u180b=SUM(A1)", "'\ufe0f\u180b=SUM(A1)"),
        ("\u17b4-2", "'\u17b4-2"),
        (" Nurse", " Nurse"),
        ("'=x", "''=x"),
        ("'quoted", "'quoted"),
        ("Nurse", "Nurse"),
        ("", ""),
    ],
)
def test_a_formula_start_gets_an_apostrophe_and_loses_it_on_reading(text, cell):
    assert spreadsheet_cell(text) == cell
    assert spreadsheet_text(cell) == text


def test_a_spreadsheet_users_quoted_formula_reads_as_its_text():
    assert spreadsheet_text("'=1+1") == "=1+1"
    assert spreadsheet_text("'plain") == "'plain"


def test_bulk_result_cells_use_the_same_guard_and_leave_numbers_alone():
    from models_app.bulk.files import csv_cell

    assert csv_cell(" =1+1") == "' =1+1"
    assert csv_cell("\uff1dcmd") == "'\uff1dcmd"
    assert csv_cell("-5") == "-5" and csv_cell(-0.25) == "-0.25"
    assert csv_cell(None) == ""


@pytest.mark.parametrize(
    "text",
    [
        "\u00a0=1+1",  # a no-break space first
        "\u3000=1+1",  # an ideographic space
        "\u2028=1+1",  # a line separator
        "\u200b=1+1",  # a zero-width space
        "\ufeff=1+1",  # a byte-order mark
        "\u00ad=1+1",  # a soft hyphen
        "\u202e=1+1",  # a direction override
        "\u3164=1+1",  # a Hangul filler, a letter drawn blank
        "\ufe661+1",  # a small equals sign
        "\u22121+1",  # a minus sign
        "\ufe62A1",  # a small plus sign
        "cmd|' /C calc'!A0",  # dynamic data exchange, no formula sign needed
        "x\u00a0+\u00a0cmd|'/C notepad'!'A1'",
    ],
)
def test_what_spreadsheets_skip_or_read_as_a_formula_sign_is_guarded(text):
    cell = spreadsheet_cell(text)
    assert cell == "'" + text
    assert spreadsheet_text(cell) == text
    assert spreadsheet_text(spreadsheet_cell("'" + text)) == "'" + text


def test_bulk_result_cells_read_numbers_in_ascii_digits_only():
    from models_app.bulk.files import csv_cell

    assert csv_cell("-\uff15") == "'-\uff15"
    assert csv_cell("\u22125") == "'\u22125"
