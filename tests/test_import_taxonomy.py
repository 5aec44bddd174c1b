from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotations.importers import ImportFileError
from annotations.models import Group, GroupRelation, Member, Taxonomy
from annotations.services.taxonomy import ImportRejected, taxonomy_import
from tests.conftest import TINY_CSV

pytestmark = pytest.mark.django_db
SHARED_ESCO = Path(__file__).resolve().parents[2] / "shared" / "data" / "esco"
ONET = Path(__file__).resolve().parent.parent / "data" / "onet"


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def snapshot() -> tuple:
    return (
        sorted(Group.objects.values_list("code", "name")),
        sorted(Member.objects.values_list("group__code", "text", "source")),
    )


def test_it_imports_groups_and_members_from_csv():
    report = taxonomy_import(slug="jobs", path=TINY_CSV, fmt="csv", name="Tiny jobs")
    assert report.taxonomy_created
    assert (report.rows_read, report.groups_created, report.members_created) == (21, 5, 21)
    nurses = Group.objects.get(taxonomy__slug="jobs", code="29-1141")
    assert nurses.name == "Registered Nurses"
    assert nurses.description == "Care for patients"
    assert sorted(nurses.members.values_list("text", flat=True)) == [
        "Charge Nurse",
        "ICU Nurse",
        "Registered Nurses",
        "Staff Nurse",
    ]
    assert set(Member.objects.values_list("source", flat=True)) == {"taxonomy"}


def test_importing_the_same_file_again_changes_nothing():
    taxonomy_import(slug="jobs", path=TINY_CSV, fmt="csv")
    before = snapshot()
    report = taxonomy_import(slug="jobs", path=TINY_CSV, fmt="csv")
    assert report.unchanged
    assert snapshot() == before


def test_reimport_updates_names_adds_and_removes_taxonomy_strings_but_keeps_curator_ones(
    tmp_path, curator
):
    first = write(
        tmp_path,
        "v1.csv",
        "group_code,group_name,text\nA,Alpha,alpha one\nA,Alpha,alpha two\nB,Beta,beta one\n",
    )
    taxonomy_import(slug="t", path=first, fmt="csv")
    alpha = Group.objects.get(code="A")
    Member.objects.create(
        taxonomy=alpha.taxonomy,
        group=alpha,
        text="alpha curated",
        normalized_text="alpha curated",
        source="curator",
        added_by=curator,
    )
    second = write(
        tmp_path,
        "v2.csv",
        "group_code,group_name,text\nA,Alpha Renamed,alpha one\nA,Alpha Renamed,ALPHA  one\n"
        "B,Beta,beta one\nB,Beta,beta two\n",
    )
    report = taxonomy_import(slug="t", path=second, fmt="csv")
    assert (report.groups_updated, report.members_created, report.members_removed) == (1, 1, 1)
    assert report.duplicates == 1
    assert Group.objects.get(code="A").name == "Alpha Renamed"
    assert sorted(Member.objects.values_list("text", "source")) == [
        ("alpha curated", "curator"),
        ("alpha one", "taxonomy"),
        ("beta one", "taxonomy"),
        ("beta two", "taxonomy"),
    ]


def test_a_file_with_bad_rows_is_rejected_whole_with_each_row_named(tmp_path):
    taxonomy_import(slug="jobs", path=TINY_CSV, fmt="csv")
    before = snapshot()
    bad = write(
        tmp_path,
        "bad.csv",
        "group_code,group_name,text\n"
        "X,Xylophonists,xylophone player\n"
        ",No Code,some text\n"
        "X,Xylophonists,\n"
        "Z,Zed,bad\x07text\n"
        f"W,Long,{'w' * 300}\n"
        "X,Other Name,clash\n",
    )
    with pytest.raises(ImportRejected) as rejected:
        taxonomy_import(slug="jobs", path=bad, fmt="csv")
    reasons = [str(error) for error in rejected.value.errors]
    assert reasons == [
        "bad.csv:3: group_code is empty",
        "bad.csv:4: text is empty, but group X has strings on other rows (an empty text stands "
        "for a group without strings, alone on its row)",
        "bad.csv:5: text contains control characters",
        "bad.csv:6: text is longer than 200 characters (300)",
        "bad.csv:7: group_code X is named 'Other Name' here but 'Xylophonists' earlier",
    ]
    assert snapshot() == before


def test_a_row_with_no_text_is_a_group_without_strings(tmp_path):
    path = write(
        tmp_path,
        "groups.csv",
        "group_code,group_name,text,description\n"
        "A,Alpha,alpha,First\n"
        "E,Empty,,Nothing in it yet\n"
        "W,Blank,   ,\n",
    )
    report = taxonomy_import(slug="t", path=path, fmt="csv")
    assert report.skipped_rows == [] and report.groups_created == 3
    assert sorted(Group.objects.values_list("code", "name", "description")) == [
        ("A", "Alpha", "First"),
        ("E", "Empty", "Nothing in it yet"),
        ("W", "Blank", ""),
    ]
    assert list(Member.objects.values_list("group__code", "text")) == [("A", "alpha")]


def test_a_file_of_groups_without_strings_only_is_refused(tmp_path):
    path = write(tmp_path, "groups.csv", "group_code,group_name,text\nE,Empty,\n")
    with pytest.raises(ImportFileError, match=r"groups\.csv holds no usable rows"):
        taxonomy_import(slug="t", path=path, fmt="csv")
    assert not Taxonomy.objects.exists()


def test_codes_that_cannot_be_a_path_segment_reject_the_file_naming_each(tmp_path):
    """A group's code is a segment of its page's address: the rule of the group form and API."""
    bad = write(
        tmp_path,
        "codes.csv",
        "group_code,group_name,text\nA,Alpha,alpha\n.,Dot,dot\n..,Dots,dots\na/b,Slash,slash\n",
    )
    with pytest.raises(ImportRejected) as rejected:
        taxonomy_import(slug="t", path=bad, fmt="csv")
    assert [str(error) for error in rejected.value.errors] == [
        "codes.csv:3: group_code '.' may not be '.' or '..': a browser reads them as steps in "
        "an address",
        "codes.csv:4: group_code '..' may not be '.' or '..': a browser reads them as steps in "
        "an address",
        "codes.csv:5: group_code 'a/b' may not contain '/'",
    ]
    assert not Taxonomy.objects.exists()


def test_skip_bad_rows_imports_the_rest_and_reports_the_skipped(tmp_path):
    bad = write(tmp_path, "bad.csv", "group_code,group_name,text\nA,Alpha,alpha\n,B,beta\n")
    report = taxonomy_import(slug="t", path=bad, fmt="csv", skip_bad_rows=True)
    assert [str(e) for e in report.skipped_rows] == ["bad.csv:3: group_code is empty"]
    assert list(Member.objects.values_list("text", flat=True)) == ["alpha"]


def test_a_reimport_with_skipped_rows_removes_no_string(tmp_path):
    first = "group_code,group_name,text\nA,Alpha,alpha\nA,Alpha,alpha two\nB,Beta,beta\n"
    taxonomy_import(slug="t", path=write(tmp_path, "first.csv", first), fmt="csv")
    # "alpha two" is refused this time (its group's name clashes), "beta" is gone from the file.
    again = "group_code,group_name,text\nA,Alpha,alpha\nA,Other,alpha two\nB,Beta,beta 2\n"
    report = taxonomy_import(
        slug="t", path=write(tmp_path, "again.csv", again), fmt="csv", skip_bad_rows=True
    )
    assert [str(e) for e in report.skipped_rows] == [
        "again.csv:3: group_code A is named 'Other' here but 'Alpha' earlier"
    ]
    assert report.members_removed == 0
    assert sorted(Member.objects.values_list("text", flat=True)) == [
        "alpha", "alpha two", "beta", "beta 2",
    ]  # fmt: skip
    # Without a skipped row, the file is the taxonomy's strings again.
    report = taxonomy_import(slug="t", path=write(tmp_path, "whole.csv", first), fmt="csv")
    assert report.members_removed == 1
    assert sorted(Member.objects.values_list("text", flat=True)) == ["alpha", "alpha two", "beta"]


def test_a_file_without_a_description_column_keeps_the_stored_descriptions(tmp_path):
    described = "group_code,group_name,text,description\nA,Alpha,alpha,The first\nB,Beta,beta,\n"
    taxonomy_import(slug="t", path=write(tmp_path, "described.csv", described), fmt="csv")
    plain = "group_code,group_name,text\nA,Alpha,alpha\nB,Beta,beta\nC,Gamma,gamma\n"
    report = taxonomy_import(slug="t", path=write(tmp_path, "plain.csv", plain), fmt="csv")
    assert (report.groups_created, report.groups_updated) == (1, 0)
    assert sorted(Group.objects.values_list("code", "description")) == [
        ("A", "The first"), ("B", ""), ("C", ""),
    ]  # fmt: skip
    # A file with the column says what each description is, an empty one too.
    emptied = "group_code,group_name,text,description\nA,Alpha,alpha,\n"
    taxonomy_import(slug="t", path=write(tmp_path, "emptied.csv", emptied), fmt="csv")
    assert Group.objects.get(code="A").description == ""


def test_blank_lines_are_no_rows_as_in_an_upload_of_inputs(tmp_path):
    """Empty or whitespace-only, between rows or at the end: nothing to import, nothing lost. A
    row of empty fields is a row, and refused."""
    path = write(
        tmp_path,
        "gaps.csv",
        "group_code,group_name,text\r\nA,Alpha,alpha\r\n\r\n   \r\nB,Beta,beta\r\n\t\r\n,,\r\n",
    )
    with pytest.raises(ImportRejected) as rejected:
        taxonomy_import(slug="t", path=path, fmt="csv")
    assert [str(error) for error in rejected.value.errors] == ["gaps.csv:7: group_code is empty"]
    report = taxonomy_import(slug="t", path=path, fmt="csv", skip_bad_rows=True)
    assert [str(error) for error in report.skipped_rows] == ["gaps.csv:7: group_code is empty"]
    assert sorted(Member.objects.values_list("group__code", "text")) == [
        ("A", "alpha"),
        ("B", "beta"),
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("code,name,title\nA,Alpha,alpha\n", "lacks the column(s) group_code, group_name, text"),
        (
            "group_code;group_name;text\nA;Alpha;alpha\n",
            "it has group_code;group_name;text; its header row seems separated by semicolons: "
            "save the file as comma-separated CSV",
        ),
        (b"group_code,group_name,text\n" + "A,Ä,x\n".encode("latin-1"), "not UTF-8"),
        ("group_code,group_name,text\n", "holds no usable rows"),
        # A quote opened and never closed would swallow the rest of the file into one field.
        (
            'group_code,group_name,text\nA,Alpha,"alpha\nB,Beta,beta\n',
            "not valid CSV: a quote opened on line 2 is never closed",
        ),
        # ... and one opened in the header, which is read before any row.
        (
            'group_code,"group_name,text\nA,Alpha,alpha\n',
            "not valid CSV: a quote opened on line 1 is never closed",
        ),
    ],
)
def test_an_unreadable_file_is_refused_and_changes_nothing(tmp_path, content, message):
    path = write(tmp_path, "f.csv", content)
    with pytest.raises(ImportFileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        taxonomy_import(slug="t", path=path, fmt="csv")
    assert not Taxonomy.objects.exists()


def test_bad_slug_format_and_path_are_refused(tmp_path):
    with pytest.raises(ImportFileError, match="slug"):
        taxonomy_import(slug="no spaces", path=TINY_CSV, fmt="csv")
    with pytest.raises(ImportFileError, match="unknown format 'xml'"):
        taxonomy_import(slug="t", path=TINY_CSV, fmt="xml")
    with pytest.raises(ImportFileError, match="does not exist"):
        taxonomy_import(slug="t", path=tmp_path / "missing.csv", fmt="csv")
    with pytest.raises(ImportFileError, match="not a folder"):
        taxonomy_import(slug="t", path=TINY_CSV, fmt="onet")


def test_esco_reads_the_preferred_label_and_every_alt_label(tmp_path):
    path = write(
        tmp_path,
        "occupations_en.csv",
        "conceptType,conceptUri,iscoGroup,preferredLabel,altLabels,description\n"
        "Occupation,http://data.europa.eu/esco/occupation/abc-1,2166,technical director,"
        '"head of technical\ntechnical manager\n",Directs technical work\n'
        "Occupation,http://data.europa.eu/esco/occupation/def-2,5120,cook,,Cooks food\n",
    )
    taxonomy_import(slug="esco", path=path, fmt="esco")
    director = Group.objects.get(code="abc-1")
    assert director.name == "technical director"
    assert sorted(director.members.values_list("text", flat=True)) == [
        "head of technical",
        "technical director",
        "technical manager",
    ]
    assert Group.objects.get(code="def-2").members.count() == 1


def test_mojibake_in_a_taxonomy_file_is_undone_and_the_row_imported(tmp_path):
    """ESCO's CSV spells a right quote as "â\x80\x99" (UTF-8 read as Latin-1) in 18
    descriptions: the import repairs it instead of refusing the file for its C1 controls."""
    path = write(
        tmp_path,
        "occupations_en.csv",
        "conceptType,conceptUri,iscoGroup,preferredLabel,altLabels,description\n"
        "Occupation,http://data.europa.eu/esco/occupation/abc-1,2331,ICT teacher,,"
        "Monitor the students\u00e2\u0080\u0099 progress\n",
    )
    report = taxonomy_import(slug="esco", path=path, fmt="esco")
    assert report.groups_created == 1
    assert Group.objects.get(code="abc-1").description == "Monitor the students\u2019 progress"


@pytest.mark.skipif(not (SHARED_ESCO / "occupations_en.csv").is_file(), reason="no ESCO data")
def test_the_whole_esco_file_imports_with_no_row_refused():
    report = taxonomy_import(slug="esco", path=SHARED_ESCO / "occupations_en.csv", fmt="esco")
    assert report.groups_created == 2_942
    assert not Group.objects.filter(description__regex="[\x80-\x9f]").exists()


def test_the_bundled_onet_imports_every_string():
    report = taxonomy_import(slug="onet", path=ONET, fmt="onet")
    assert report.rows_read == 53_770
    assert report.groups_created == 1_016
    # Three rows repeat a title already listed for the same occupation; 2,179 titles written
    # "Long Form (Abbreviation)" give their group their shorter form as a member too.
    assert (report.members_created, report.duplicates) == (53_767 + 2_179, 3)
    nurses = set(Member.objects.filter(group__code="29-1141.00").values_list("text", flat=True))
    assert {"Emergency Room Registered Nurse (ER RN)", "ER RN"} <= nurses
    assert {"Emergency Department RN (Emergency Department Registered Nurse)",
            "Emergency Department RN"} <= nurses  # fmt: skip
    assert report.relations == 18_460
    assert GroupRelation.objects.filter(
        group__code="15-1252.00", related__code="15-1251.00"
    ).exists()
    assert Group.objects.get(code="15-1252.00").name == "Software Developers"
    assert Member.objects.filter(group__code="15-1252.00", text="Java Software Engineer").exists()


def test_the_command_reports_bad_rows_and_exits_non_zero(tmp_path, capsys):
    bad = write(tmp_path, "bad.csv", "group_code,group_name,text\nA,Alpha,alpha\nA,Alpha,\n")
    with pytest.raises(CommandError, match="1 of 2 rows are bad; nothing was imported"):
        call_command("import_taxonomy", "t", str(bad), "--format", "csv")
    assert "bad.csv:3: text is empty" in capsys.readouterr().err
    assert not Taxonomy.objects.exists()


def test_the_command_prints_a_summary(capsys):
    call_command("import_taxonomy", "jobs", str(TINY_CSV), "--format", "csv")
    assert "21 rows read; groups 5 created" in capsys.readouterr().out


def test_the_command_refuses_wrong_columns_and_other_encodings(tmp_path):
    wrong = write(tmp_path, "w.csv", "code,name\nA,B\n")
    with pytest.raises(CommandError, match="lacks the column"):
        call_command("import_taxonomy", "t", str(wrong))
    latin = write(tmp_path, "l.csv", "group_code,group_name,text\nA,Caf\xe9,x\n".encode("latin-1"))
    with pytest.raises(CommandError, match="not UTF-8 text"):
        call_command("import_taxonomy", "t", str(latin))
    assert not Taxonomy.objects.exists()


def test_control_characters_in_a_description_reject_the_row(tmp_path):
    path = write(
        tmp_path, "d.csv", "group_code,group_name,text,description\nA,Alpha,a,bad\x00desc\n"
    )
    with pytest.raises(ImportRejected) as rejected:
        taxonomy_import(slug="t", path=path, fmt="csv")
    assert [str(e) for e in rejected.value.errors] == [
        "d.csv:2: description contains control characters"
    ]


def test_a_field_too_large_for_csv_is_a_file_error(tmp_path):
    path = write(tmp_path, "big.csv", "group_code,group_name,text\nA,Alpha," + "x" * 200_000 + "\n")
    with pytest.raises(ImportFileError, match="not valid CSV near line"):
        taxonomy_import(slug="t", path=path, fmt="csv")


def test_onet_related_occupations_with_an_unknown_code_reject_the_file(tmp_path):
    folder = tmp_path / "onet"
    folder.mkdir()
    (folder / "Occupation Data.txt").write_text(
        "O*NET-SOC Code\tTitle\tDescription\n11-1011.00\tChief Executives\tRun things\n"
        "11-1021.00\tGeneral Managers\tManage things\n"
    )
    (folder / "Alternate Titles.txt").write_text(
        "O*NET-SOC Code\tAlternate Title\n11-1011.00\tCEO\n"
    )
    (folder / "Related Occupations.txt").write_text(
        "O*NET-SOC Code\tRelated O*NET-SOC Code\n11-1011.00\t11-1021.00\n11-1011.00\t99-9999.00\n"
    )
    with pytest.raises(ImportRejected) as rejected:
        taxonomy_import(slug="o", path=folder, fmt="onet")
    assert [str(e) for e in rejected.value.errors] == [
        "Related Occupations.txt:3: unknown occupation code '99-9999.00'"
    ]
    report = taxonomy_import(slug="o", path=folder, fmt="onet", skip_bad_rows=True)
    assert report.relations == 1
    relation = GroupRelation.objects.get()
    assert (relation.group.code, relation.related.code) == ("11-1011.00", "11-1021.00")


def test_a_bom_crlf_rtl_marks_emoji_and_escaped_formulas_import_as_written(tmp_path):
    """As written, but for the direction marks the text rule drops (annotations/text_rule.py)."""
    content = (
        "\ufeffgroup_code,group_name,text,description\r\n"
        "A,مهندسون\u200f,مهندس برمجيات\u200f,\r\n"
        "A,مهندسون\u200f,Chef 👩\u200d🍳,\r\n"
        "B,'=Formulas,'=cmd|' /C calc'!A0,'@first\r\n"
        "B,'=Formulas,'+1 plain,\r\n"
    )
    report = taxonomy_import(slug="t", path=write(tmp_path, "f.csv", content), fmt="csv")
    assert report.skipped_rows == []
    assert sorted(Group.objects.values_list("code", "name", "description")) == [
        ("A", "مهندسون", ""),
        ("B", "=Formulas", "@first"),
    ]
    assert sorted(Member.objects.values_list("text", flat=True)) == sorted(
        ["مهندس برمجيات", "Chef 👩\u200d🍳", "=cmd|' /C calc'!A0", "+1 plain"]
    )


def test_control_characters_in_a_string_reject_the_file_naming_the_row(tmp_path):
    content = "group_code,group_name,text\r\nA,Alpha,bell\x07boy\r\nA,Alpha,alpha\r\n"
    with pytest.raises(ImportRejected) as refused:
        taxonomy_import(slug="t", path=write(tmp_path, "f.csv", content), fmt="csv")
    assert [str(error) for error in refused.value.errors] == [
        "f.csv:2: text contains control characters"
    ]
    assert not Taxonomy.objects.exists()


def test_the_command_queues_what_makes_a_new_taxonomy_serve_as_the_page_does(capsys):
    """A new taxonomy imported from the command line serves with the pretrained tower once a
    worker has encoded it, its training following; it used to serve nothing until `train`."""
    from models_app.models import TrainingRun
    from models_app.siamese.specs import PRETRAINED_SPEC

    call_command("import_taxonomy", "jobs", str(TINY_CSV), "--format", "csv")
    run = TrainingRun.objects.get(taxonomy__slug="jobs")
    assert (run.kind, run.status, run.trigger, run.config) == (
        "build",
        "queued",
        "import",
        PRETRAINED_SPEC,
    )
    assert f"queued run #{run.id}: jobs serves with the pretrained model" in capsys.readouterr().out
    call_command("import_taxonomy", "skills", str(TINY_CSV), "--format", "csv", "--no-model")
    assert not TrainingRun.objects.filter(taxonomy__slug="skills").exists()


def test_the_command_says_why_a_taxonomy_of_one_group_is_not_queued_to_serve(tmp_path, capsys):
    from models_app.models import TrainingRun

    solo = write(tmp_path, "solo.csv", "group_code,group_name,text\nA,Alpha,alpha\n")
    call_command("import_taxonomy", "solo", str(solo), "--format", "csv")
    out = capsys.readouterr().out
    assert "nothing queued: solo cannot serve yet: its strings are in 1 group" in out
    assert Taxonomy.objects.filter(slug="solo").exists()
    assert not TrainingRun.objects.exists()


def test_esco_and_onet_files_without_a_description_column_keep_the_stored_ones(tmp_path):
    uri = "Occupation,http://data.europa.eu/esco/occupation"
    described = write(tmp_path, "occupations_en.csv",
                      "conceptType,conceptUri,iscoGroup,preferredLabel,altLabels,description\n"
                      f"{uri}/abc-1,2166,technical director,,Directs technical work\n")  # fmt: skip
    taxonomy_import(slug="esco", path=described, fmt="esco")
    (tmp_path / "plain").mkdir()
    plain = write(tmp_path / "plain", "occupations_en.csv",
                  "conceptType,conceptUri,iscoGroup,preferredLabel,altLabels\n"
                  f"{uri}/abc-1,2166,technical director,head of technical\n")  # fmt: skip
    taxonomy_import(slug="esco", path=plain, fmt="esco")
    assert Group.objects.get(code="abc-1").description == "Directs technical work"

    folder = tmp_path / "onet"
    folder.mkdir()
    occupations = "O*NET-SOC Code\tTitle\tDescription\n11-1011.00\tChief Executives\tRun things\n"
    write(folder, "Occupation Data.txt", occupations)
    write(folder, "Alternate Titles.txt", "O*NET-SOC Code\tAlternate Title\n11-1011.00\tCEO\n")
    taxonomy_import(slug="o", path=folder, fmt="onet")
    write(folder, "Occupation Data.txt", "O*NET-SOC Code\tTitle\n11-1011.00\tChief Executives\n")
    taxonomy_import(slug="o", path=folder, fmt="onet")
    assert Group.objects.get(code="11-1011.00").description == "Run things"


def test_an_onet_title_spelled_long_and_short_gives_its_group_the_short_form_too(tmp_path):
    folder = tmp_path / "onet"
    folder.mkdir()
    occupations = ("O*NET-SOC Code\tTitle\tDescription\n11-1011.00\tChief Executives\tRun things\n"
                   "29-1141.00\tRegistered Nurses\tNurse\n")  # fmt: skip
    write(folder, "Occupation Data.txt", occupations)
    write(folder, "Alternate Titles.txt", "O*NET-SOC Code\tAlternate Title\n"
          "11-1011.00\tChief Executive Officer (CEO)\n11-1011.00\tceo\n"
          "29-1141.00\tTravel Registered Nurse (Travel RN)\n"
          "29-1141.00\tNurse (ICU) (Nights)\n")  # fmt: skip
    report = taxonomy_import(slug="o", path=folder, fmt="onet")
    assert sorted(Member.objects.values_list("group__code", "text")) == [
        ("11-1011.00", "Chief Executive Officer (CEO)"),
        ("11-1011.00", "Chief Executives"),
        ("11-1011.00", "ceo"),  # the file's own, already the short form: not twice
        ("29-1141.00", "Nurse (ICU) (Nights)"),  # two parentheses: no form of it
        ("29-1141.00", "Registered Nurses"),
        ("29-1141.00", "Travel RN"),
        ("29-1141.00", "Travel Registered Nurse (Travel RN)"),
    ]
    assert (report.members_created, report.duplicates) == (7, 0)
