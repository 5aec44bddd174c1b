from __future__ import annotations

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotations.models import AuditEvent, Input, Prediction, ReviewItem
from annotations.services.inputs_upload import (
    UPLOAD_ERRORS_SHOWN,
    UploadFileError,
    UploadRejected,
    inputs_upload,
    parse_inputs_file,
)
from annotations.services.taxonomy import taxonomy_import
from siamweb.humanize import format_size
from tests.conftest import TINY_CSV


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (512 * 1024, "512 KB"),
        (2 * 1024**2, "2.0 MB"),
        (1024**3, "1.0 GB"),
        (1536 * 1024**2, "1.5 GB"),
    ],
)
def test_sizes_read_in_the_largest_unit_they_fill(size, text):
    assert format_size(size) == text


# --- parsing, without HTTP ------------------------------------------------------------------


def test_a_csv_with_a_byte_order_mark_yields_its_text_column_and_ignores_the_others():
    data = "\ufeffid,Text,city\n1,Sr. Java Dev,Berlin\n2,  ICU   nurse ,Bonn\n".encode()
    parsed = parse_inputs_file(data=data, filename="titles.csv")
    assert parsed.texts == ["Sr. Java Dev", "ICU nurse"]
    assert (parsed.errors, parsed.rows_read) == ([], 2)


def test_an_unclosed_quote_is_refused_not_merged_into_one_row():
    data = b'text\nBarista\n"Java Dev, Berlin\nICU nurse\nTruck driver\n'
    with pytest.raises(UploadFileError, match="not valid CSV: a quote opened on line 3 is never"):
        parse_inputs_file(data=data, filename="titles.csv")


@pytest.mark.parametrize(
    ("data", "line"), [(b'"text\nBarista\n', 1), (b'\n \n"text,note\nBarista,a\n', 3)]
)
def test_an_unclosed_quote_in_the_header_is_refused_naming_its_line(data, line):
    with pytest.raises(UploadFileError, match=f"a quote opened on line {line} is never closed"):
        parse_inputs_file(data=data, filename="titles.csv")


def test_a_csv_without_a_byte_order_mark_reads_the_same():
    parsed = parse_inputs_file(data=b"text\nBarista\n", filename="titles.CSV")
    assert parsed.texts == ["Barista"]


def test_a_txt_file_holds_one_text_per_line_and_trailing_empty_lines_are_not_rows():
    parsed = parse_inputs_file(data=b"Java dev\r\nTrucker\n\n\n", filename="titles.txt")
    assert parsed.texts == ["Java dev", "Trucker"]
    assert (parsed.errors, parsed.rows_read, parsed.blank_lines) == ([], 2, 2)


@pytest.mark.parametrize(
    "data",
    [b"Nurse\rDoctor\rChef\r", b"Nurse\r\nDoctor\rChef\n", b"Nurse\n\rDoctor\r\nChef"],
)
def test_a_bare_carriage_return_ends_a_line_as_old_macs_and_excel_write_it(data):
    """Split on line feeds alone, such a file was one text: "Nurse Doctor Chef"."""
    parsed = parse_inputs_file(data=data, filename="titles.txt")
    assert parsed.texts == ["Nurse", "Doctor", "Chef"]
    assert parsed.errors == []


@pytest.mark.parametrize(
    ("data", "filename", "blank"),
    [
        (b"text\nnurse\n\nwelder\n", "titles.csv", 1),
        (b"nurse\n\nwelder\n", "titles.txt", 1),
        # Whitespace is blank too, before the header, between rows and at the end; CRLF alike.
        (b"\r\n \r\ntext\r\nnurse\r\n\t\r\nwelder\r\n  \r\n", "titles.csv", 4),
        (b" \r\nnurse\r\n\t\r\nwelder\r\n  ", "titles.txt", 3),
    ],
)
def test_blank_lines_are_skipped_and_counted_wherever_they_are(data, filename, blank):
    """A blank line holds no input: leaving it out loses nothing."""
    parsed = parse_inputs_file(data=data, filename=filename)
    assert parsed.texts == ["nurse", "welder"]
    assert (parsed.errors, parsed.rows_read, parsed.blank_lines) == ([], 2, blank)


@pytest.mark.parametrize(
    ("data", "filename", "message"),
    [
        (b"text\n\n   \n\n", "titles.csv", "holds no rows"),
        (b"\n \n\t\n", "titles.txt", "holds no rows"),
        (b"\n  \n", "titles.csv", "is empty; it needs a header row"),
    ],
)
def test_a_file_of_blank_lines_holds_no_rows(data, filename, message):
    with pytest.raises(UploadFileError, match=message):
        parse_inputs_file(data=data, filename=filename)


def test_a_csv_row_of_empty_fields_is_no_blank_line_and_is_reported():
    parsed = parse_inputs_file(data=b"text,note\nnurse,a\n  ,  \n", filename="titles.csv")
    assert [(e.line, e.reason) for e in parsed.errors] == [(3, "text is empty")]
    assert (parsed.rows_read, parsed.blank_lines) == (2, 0)


def test_a_file_that_is_not_utf8_is_refused_naming_the_line():
    data = "text\nBarista\nCafé\n".encode("latin-1")
    with pytest.raises(UploadFileError, match=r"not UTF-8 text \(invalid byte at line 3\)"):
        parse_inputs_file(data=data, filename="titles.csv")


def test_a_file_with_a_byte_order_mark_that_is_not_utf8_is_refused_naming_the_right_line():
    data = "\ufefftext\nBarista\n".encode() + "Éclair chef\n".encode("latin-1")
    with pytest.raises(UploadFileError, match=r"not UTF-8 text \(invalid byte at line 3\)"):
        parse_inputs_file(data=data, filename="titles.csv")


def test_a_utf16_file_is_refused_with_a_hint_to_save_it_as_utf8():
    data = "text\nBarista\n".encode("utf-16")
    with pytest.raises(UploadFileError, match="UTF-16 text; save it as UTF-8"):
        parse_inputs_file(data=data, filename="titles.csv")


def test_a_csv_without_a_text_column_is_refused_naming_the_columns_it_has():
    with pytest.raises(UploadFileError, match=r"lacks a 'text' column.*it has 'title', 'city'"):
        parse_inputs_file(data=b"title,city\nBarista,Bonn\n", filename="titles.csv")


def test_a_csv_separated_by_semicolons_is_refused_saying_so():
    with pytest.raises(
        UploadFileError,
        match=re.escape(
            "it has 'text;city'; its header row seems separated by semicolons: save the file as "
            "comma-separated CSV"
        ),
    ):
        parse_inputs_file(data=b"text;city\nBarista;Bonn\n", filename="titles.csv")


def test_a_file_that_is_neither_csv_nor_txt_is_refused():
    with pytest.raises(UploadFileError, match=r"neither a \.csv nor a \.txt file"):
        parse_inputs_file(data=b"text\nBarista\n", filename="titles.xlsx")


def test_an_empty_file_is_refused():
    with pytest.raises(UploadFileError, match="holds no rows"):
        parse_inputs_file(data=b"", filename="titles.txt")


def test_bad_rows_are_reported_with_their_line_numbers(settings):
    settings.SIAMWEB_MAX_TEXT_LENGTH = 20
    data = (
        "text,note\n"  # 1
        "Barista,ok\n"  # 2
        ",blank text\n"  # 3
        f"{'x' * 21},too long\n"  # 4
        "Java\x07Dev,bell\n"  # 5
        '"Long haul\ntrucker",spans two lines\n'  # 6-7
        "Nurse,ICU,Bonn\n"  # 8: one field too many
        "\n"  # 9: a blank line between rows, skipped
        "Accountant,ok\n"  # 10
    ).encode()
    parsed = parse_inputs_file(data=data, filename="titles.csv")
    assert parsed.texts == ["Barista", "Long haul trucker", "Accountant"]
    assert [(e.line, e.reason) for e in parsed.errors] == [
        (3, "text is empty"),
        (4, "text is longer than 20 characters (21)"),
        (5, "text contains control characters"),
        (8, "3 fields but the header names 2 (an unquoted comma?)"),
    ]
    assert (parsed.rows_read, parsed.blank_lines) == (7, 1)


def test_bad_lines_of_a_txt_file_are_reported_with_their_line_numbers():
    parsed = parse_inputs_file(data=b"Barista\n   \nNul\x00here\nNurse\n", filename="t.txt")
    assert parsed.texts == ["Barista", "Nurse"]
    assert [(e.line, e.reason) for e in parsed.errors] == [(3, "text contains control characters")]


def test_a_file_with_more_rows_than_the_limit_is_refused(settings):
    settings.SIAMWEB_UPLOAD_MAX_ROWS = 3
    with pytest.raises(UploadFileError, match="more than 3 rows; split it"):
        parse_inputs_file(data=b"a\nb\nc\nd\n", filename="titles.txt")


def test_a_file_larger_than_the_limit_is_refused(settings):
    settings.SIAMWEB_UPLOAD_MAX_BYTES = 1024
    with pytest.raises(UploadFileError, match="files up to 1 KB are accepted"):
        parse_inputs_file(data=b"Barista\n" * 200, filename="titles.txt")


# --- storing, without HTTP ------------------------------------------------------------------


def test_bad_rows_refuse_the_whole_file_and_store_nothing(tiny_taxonomy, curator):
    parsed = parse_inputs_file(data=b"Barista\nNul\x00\nNurse\n", filename="t.txt")
    with pytest.raises(UploadRejected, match="1 of 3 rows are bad; nothing was stored"):
        inputs_upload(taxonomy=tiny_taxonomy, parsed=parsed, filename="t.txt", user=curator)
    assert not Input.objects.exists()
    assert not AuditEvent.objects.filter(action="inputs.upload").exists()


def test_skipping_bad_rows_stores_the_good_ones_and_still_lists_the_bad(tiny_taxonomy, curator):
    parsed = parse_inputs_file(data=b"Barista\nNul\x00\nNurse\nbarista\n", filename="t.txt")
    report = inputs_upload(
        taxonomy=tiny_taxonomy, parsed=parsed, filename="t.txt", user=curator, skip_bad_rows=True
    )
    assert (report.rows_read, report.new_inputs, report.repeated_inputs) == (4, 2, 0)
    assert report.duplicate_rows == 1
    assert [(e.line, e.reason) for e in report.rejected] == [
        (2, "text contains control characters")
    ]
    assert sorted(Input.objects.values_list("text", "source", "occurrences")) == [
        ("Barista", "upload", 1),
        ("Nurse", "upload", 1),
    ]
    assert ReviewItem.objects.count() == 2
    event = AuditEvent.objects.get(action="inputs.upload")
    assert (event.actor, event.taxonomy, event.after["new_inputs"]) == (curator, tiny_taxonomy, 2)


def test_skipping_bad_rows_when_every_row_is_bad_stores_nothing_and_lists_them(
    tiny_taxonomy, curator
):
    parsed = parse_inputs_file(data=b"Nul\x00\n\nBell\x07\n", filename="t.txt")
    with pytest.raises(UploadRejected, match="no row is usable: 2 of 2 rows are bad") as refused:
        inputs_upload(
            taxonomy=tiny_taxonomy,
            parsed=parsed,
            filename="t.txt",
            user=curator,
            skip_bad_rows=True,
        )
    assert [(e.line, e.reason) for e in refused.value.parsed.errors] == [
        (1, "text contains control characters"),
        (3, "text contains control characters"),
    ]
    assert not Input.objects.exists()
    assert not AuditEvent.objects.filter(action="inputs.upload").exists()


def test_a_large_file_is_stored_in_chunks_with_one_prediction_per_text(
    tiny_taxonomy, curator, monkeypatch
):
    monkeypatch.setattr("annotations.services.inputs_upload.UPLOAD_CHUNK_SIZE", 3)
    texts = [f"Java developer {n}" for n in range(8)]
    parsed = parse_inputs_file(data="\n".join(texts).encode(), filename="t.txt")
    report = inputs_upload(taxonomy=tiny_taxonomy, parsed=parsed, filename="t.txt", user=curator)
    assert (report.new_inputs, report.repeated_inputs) == (8, 0)
    assert sorted(Input.objects.values_list("text", flat=True)) == sorted(texts)
    assert Prediction.objects.count() == ReviewItem.objects.count() == 8


# --- the page -------------------------------------------------------------------------------


def upload(client, content: bytes, name: str = "titles.csv", taxonomy: str = "jobs", **extra):
    data = {"taxonomy": taxonomy, "file": SimpleUploadedFile(name, content), **extra}
    return client.post("/inputs/upload/", data)


CSV = b"text,source\nSr. Java Dev (m/f/d) Berlin,jobboard\nICU staff nurse,jobboard\n"


def test_anonymous_visitors_are_sent_to_log_in(client, tiny_taxonomy):
    response = client.get("/inputs/upload/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/inputs/upload/"
    assert upload(client, CSV).status_code == 302
    assert not Input.objects.exists()


def test_a_user_without_a_role_is_refused(client, tiny_taxonomy, user_model):
    outsider = user_model.objects.create_user(username="olga", password="olga-pass-123")
    client.force_login(outsider)
    assert client.get("/inputs/upload/").status_code == 403
    assert upload(client, CSV).status_code == 403
    assert not Input.objects.exists()


def test_the_page_says_which_files_it_accepts(client, curator, tiny_taxonomy):
    client.force_login(curator)
    response = client.get("/inputs/upload/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "header row that names a <code>text</code> column" in page
    assert "one text per line" in page
    assert 'name="skip_bad_rows"' in page


def test_a_curator_uploads_a_csv_and_sees_a_summary_with_a_link_to_the_review_queue(
    client, curator, tiny_taxonomy
):
    client.force_login(curator)
    response = upload(client, CSV)
    assert response.status_code == 200
    page = response.content.decode()
    assert '<dd data-testid="rows-read">2</dd>' in page
    assert '<dd data-testid="new-inputs">2</dd>' in page
    assert '<dd data-testid="repeated-inputs">0</dd>' in page
    assert '<dd data-testid="rejected-rows">0</dd>' in page
    assert 'href="/review/?taxonomy=jobs"' in page
    assert sorted(Input.objects.values_list("text", "source")) == [
        ("ICU staff nurse", "upload"),
        ("Sr. Java Dev (m/f/d) Berlin", "upload"),
    ]
    assert ReviewItem.objects.filter(taxonomy=tiny_taxonomy, status="pending").count() == 2


def test_an_admin_may_upload_too(client, admin_user, tiny_taxonomy):
    client.force_login(admin_user)
    assert upload(client, b"Barista\n", name="titles.txt").status_code == 200
    assert Input.objects.get().text == "Barista"


def test_uploading_the_same_file_again_counts_one_more_occurrence(client, curator, tiny_taxonomy):
    client.force_login(curator)
    assert upload(client, CSV).status_code == 200
    response = upload(client, CSV + b"Barista,walk-in\n")
    assert response.status_code == 200
    page = response.content.decode()
    assert '<dd data-testid="new-inputs">1</dd>' in page
    assert '<dd data-testid="repeated-inputs">2</dd>' in page
    assert dict(Input.objects.values_list("text", "occurrences")) == {
        "Sr. Java Dev (m/f/d) Berlin": 2,
        "ICU staff nurse": 2,
        "Barista": 1,
    }
    assert ReviewItem.objects.count() == 3


def test_a_file_with_bad_rows_is_refused_listing_the_lines_and_nothing_is_stored(
    client, curator, tiny_taxonomy
):
    client.force_login(curator)
    response = upload(client, b"text,note\nBarista,a\n\x1bNurse,b\n,c\n   \n")
    assert response.status_code == 400
    page = response.content.decode()
    assert "2 of 3 rows are bad; nothing was stored" in page
    assert "line 3: text contains control characters" in page
    assert "line 4: text is empty" in page
    assert "line 5" not in page
    assert not Input.objects.exists()


def test_blank_lines_in_the_middle_are_skipped_and_the_summary_counts_them(
    client, curator, tiny_taxonomy
):
    client.force_login(curator)
    for name, content in [
        ("titles.csv", b"text\nnurse\n\nwelder\n"),
        ("t.txt", b"cook\n \nbaker\n"),
    ]:
        response = upload(client, content, name=name)
        assert response.status_code == 200
        page = response.content.decode()
        assert '<dd data-testid="rows-read">2</dd>' in page
        assert '<dd data-testid="new-inputs">2</dd>' in page
        assert '<dd data-testid="blank-lines">1</dd>' in page
    assert sorted(Input.objects.values_list("text", flat=True)) == [
        "baker",
        "cook",
        "nurse",
        "welder",
    ]
    event = AuditEvent.objects.filter(action="inputs.upload").latest("id")
    assert event.after["blank_lines"] == 1


def test_a_file_with_no_blank_lines_says_nothing_of_them(client, curator, tiny_taxonomy):
    client.force_login(curator)
    response = upload(client, CSV)
    assert response.status_code == 200
    assert 'data-testid="blank-lines"' not in response.content.decode()


def test_ticking_skip_bad_rows_stores_the_good_rows_and_lists_the_bad(
    client, curator, tiny_taxonomy
):
    client.force_login(curator)
    response = upload(client, b"text\nBarista\n\x1bNurse\n", skip_bad_rows="on")
    assert response.status_code == 200
    page = response.content.decode()
    assert '<dd data-testid="rejected-rows">1</dd>' in page
    assert "line 3: text contains control characters" in page
    assert list(Input.objects.values_list("text", flat=True)) == ["Barista"]


def test_skip_bad_rows_with_every_row_bad_lists_the_lines_and_reasons_as_without_it(
    client, curator, tiny_taxonomy
):
    client.force_login(curator)
    content = "text\n\u202eenignE\n".encode()
    for extra in ({"skip_bad_rows": "on"}, {}):
        response = upload(client, content, name="bidi.csv", **extra)
        assert response.status_code == 400
        page = response.content.decode()
        assert "1 of 1 rows are bad; nothing was stored" in page
        assert "line 2: text contains bidirectional controls (U+202E RIGHT-TO-LEFT" in page
    assert not Input.objects.exists()


def test_skip_bad_rows_with_every_row_bad_lists_as_many_as_without_it(
    client, curator, tiny_taxonomy
):
    client.force_login(curator)
    content = b"text\n" + b"bell\x07boy\n" * (UPLOAD_ERRORS_SHOWN + 1)
    response = upload(client, content, skip_bad_rows="on")
    assert response.status_code == 400
    page = response.content.decode()
    assert f"{UPLOAD_ERRORS_SHOWN + 1} bad rows (the first {UPLOAD_ERRORS_SHOWN} listed)" in page
    assert page.count('data-testid="rejected-row"') == UPLOAD_ERRORS_SHOWN
    assert not Input.objects.exists()


def test_a_file_in_the_wrong_encoding_is_refused_with_a_clear_error(client, curator, tiny_taxonomy):
    client.force_login(curator)
    response = upload(client, "text\nCafé\n".encode("cp1252"))
    assert response.status_code == 400
    page = response.content.decode()
    assert "file: titles.csv is not UTF-8 text (invalid byte at line 2)" in page
    assert not Input.objects.exists()


def test_a_csv_without_a_text_column_is_refused_on_the_page(client, curator, tiny_taxonomy):
    client.force_login(curator)
    response = upload(client, b"title\nBarista\n")
    assert response.status_code == 400
    assert "lacks a &#x27;text&#x27; column" in response.content.decode()
    assert not Input.objects.exists()


def test_an_unknown_taxonomy_or_a_missing_file_is_refused_naming_the_field(
    client, curator, tiny_taxonomy
):
    client.force_login(curator)
    response = upload(client, CSV, taxonomy="nope")
    assert response.status_code == 400
    assert "taxonomy: no taxonomy &#x27;nope&#x27;" in response.content.decode()
    response = client.post("/inputs/upload/", {"taxonomy": "jobs"})
    assert response.status_code == 400
    assert "file: choose a .csv or .txt file" in response.content.decode()
    assert not Input.objects.exists()


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(
    client, curator, tiny_taxonomy, settings
):
    settings.SIAMWEB_UPLOAD_MAX_BYTES = 1024
    client.force_login(curator)
    response = upload(client, b"text\n" + b"Barista\n" * 200)
    assert response.status_code == 400
    assert "files up to 1 KB are accepted, split it" in response.content.decode()
    assert not Input.objects.exists()


@pytest.fixture
def taxonomy_without_model(db):
    return taxonomy_import(slug="bare", path=TINY_CSV, fmt="csv", name="No model yet").taxonomy


def test_without_a_live_model_the_upload_is_refused_and_nothing_is_stored(
    client, curator, taxonomy_without_model
):
    client.force_login(curator)
    response = upload(client, CSV, taxonomy="bare")
    assert response.status_code == 409
    page = response.content.decode()
    assert "has no live model yet" in page
    assert "nothing was stored" in page
    assert not Input.objects.exists()
    assert not AuditEvent.objects.filter(action="inputs.upload").exists()


# --- texts as people write them: line endings, scripts, emoji, formulas, control characters -----

TEXTS = [
    "مهندس برمجيات\u200f",  # Arabic with a right-to-left mark
    "מפתח תוכנה",  # Hebrew
    "Chef 👩\u200d🍳 de cuisine",  # an emoji sequence with a zero-width joiner
    "=cmd|' /C calc'!A0",  # a formula is text here: stored as sent, never run
    "+49 Barista",
    "@home carer",
]
# As stored: the direction mark dropped (the text rule, annotations/text_rule.py), the rest
# as sent.
STORED = ["مهندس برمجيات", *TEXTS[1:]]


def test_crlf_line_endings_rtl_marks_emoji_and_formula_cells_are_read_as_sent():
    body = "".join('"{}",x\r\n'.format(text.replace('"', '""')) for text in TEXTS)
    parsed = parse_inputs_file(data=("\ufefftext,other\r\n" + body).encode(), filename="t.csv")
    assert parsed.texts == STORED
    assert (parsed.errors, parsed.rows_read) == ([], len(TEXTS))


def test_control_characters_in_a_text_refuse_its_row_naming_the_line():
    data = b"text\r\nBarista\r\nbell\x07boy\r\nnul\x00nurse\r\nTrucker\r\n"
    parsed = parse_inputs_file(data=data, filename="titles.csv")
    assert parsed.texts == ["Barista", "Trucker"]
    assert [(error.line, "control characters" in error.reason) for error in parsed.errors] == [
        (3, True),
        (4, True),
    ]


def test_rtl_emoji_and_formula_texts_are_stored_whole_through_the_page(
    client, curator, tiny_taxonomy
):
    client.force_login(curator)
    body = "text\r\n" + "".join('"{}"\r\n'.format(t.replace('"', '""')) for t in TEXTS)
    upload = SimpleUploadedFile("people.csv", body.encode(), content_type="text/csv")
    response = client.post("/inputs/upload/", {"taxonomy": "jobs", "file": upload})
    assert response.status_code == 200
    assert sorted(Input.objects.values_list("text", flat=True)) == sorted(STORED)
    assert ReviewItem.objects.count() == len(TEXTS)
