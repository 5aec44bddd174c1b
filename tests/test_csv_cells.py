"""Spreadsheet-safe CSV cells: escaping and reading back are exact inverses."""

from __future__ import annotations

import pytest

from annotations.csv_cells import spreadsheet_cell, spreadsheet_text


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
    from models_app.bulk_files import csv_cell

    assert csv_cell(" =1+1") == "' =1+1"
    assert csv_cell("\uff1dcmd") == "'\uff1dcmd"
    assert csv_cell("-5") == "-5" and csv_cell(-0.25) == "-0.25"
    assert csv_cell(None) == ""
