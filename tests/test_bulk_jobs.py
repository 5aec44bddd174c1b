"""A bulk job normalizes a whole file in chunks into result files: every input column kept, the
answer beside it, resumable after its worker dies, cancellable, one model version throughout,
and a clear error for a file it cannot read."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from django.db.models import F
from django.utils import timezone

from annotations.models import Group, Input, Member, ReviewItem
from annotations.services.taxonomy import taxonomy_import
from models_app.bulk import files as bulk_files
from models_app.bulk import jobs as bulk
from models_app.bulk import run as bulk_run
from models_app.bulk.files import RESULT_COLUMNS, BulkFileError, still_quoted
from models_app.bulk.jobs import (
    BulkStateError,
    bulk_job_cancel,
    bulk_job_create,
    bulk_job_delete,
    bulk_job_retry,
)
from models_app.bulk.run import JobBusy, bulk_job_execute
from models_app.bulk.selectors import bulk_job_expires, bulk_job_result
from models_app.models import BulkChunk, BulkJob, Deployment
from models_app.serving.engines import NoLiveModel, artifact_path
from models_app.serving.normalize import rank_taxonomy_groups
from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.text import comparison_key
from tests.conftest import TINY_CSV, build_live_model
from worker.tasks import delete_expired_bulk_jobs, resume_stale_bulk_jobs

TITLES = ["Senior Java Engineer", "icu nurse", "Head Barista", "CDL Truck Driver", "Tax Accountant",
          "python developer", "night charge nurse", "espresso bar attendant", "long haul trucker",
          "staff accountant ii", "backend developer remote"]  # fmt: skip


def csv_bytes(rows: list[list[str]]) -> bytes:
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    return out.getvalue().encode("utf-8")


def jobs_csv(titles=TITLES) -> bytes:
    return csv_bytes(
        [["id", "title", "city"], *[[str(i), t, f"City {i}"] for i, t in enumerate(titles)]]
    )


def create(
    taxonomy, data: bytes, filename="jobs.csv", column="title", user=None, **thresholds
) -> BulkJob:
    return bulk_job_create(
        taxonomy=taxonomy,
        upload=io.BytesIO(data),
        filename=filename,
        column=column,
        user=user,
        enqueue=False,
        **thresholds,
    )


def result_rows(job: BulkJob) -> list[dict]:
    with bulk_job_result(job, "csv").open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def jsonl_rows(job: BulkJob) -> list[dict]:
    lines = bulk_job_result(job, "jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_a_csv_is_normalized_in_chunks_keeping_every_column(tiny_taxonomy, curator):
    job = create(tiny_taxonomy, jobs_csv(), user=curator)
    assert job.status == BulkJob.Status.QUEUED and job.requested_by == curator
    done = bulk_job_execute(job_id=job.id, chunk_rows=3)
    assert done.status == BulkJob.Status.SUCCEEDED, done.error
    assert (done.rows_done, done.rows_failed, done.progress) == (len(TITLES), 0, 1.0)
    rows = result_rows(done)
    assert list(rows[0]) == ["id", "title", "city", *RESULT_COLUMNS]
    assert [(r["id"], r["title"], r["city"]) for r in rows] == [
        (str(i), t, f"City {i}") for i, t in enumerate(TITLES)
    ]
    expected = rank_taxonomy_groups(tiny_taxonomy, TITLES, k=2)
    for row, answer in zip(rows, expected, strict=True):
        top, runner_up = answer.groups
        assert (row["group_code"], row["group_name"], row["matched_member"]) == (
            top.code, top.name, top.member,
        )  # fmt: skip
        assert float(row["score"]) == top.score
        assert (row["source"], row["model_version"]) == ("model", "jobs/v1")
        assert (row["runner_up_code"], float(row["runner_up_score"])) == (
            runner_up.code, runner_up.score,
        )  # fmt: skip
        # The lead in probability, the order the groups come in: never negative.
        assert float(row["margin"]) == round(top.probability - runner_up.probability, 4) >= 0
    lines = jsonl_rows(done)
    assert [line["input"]["title"] for line in lines] == TITLES
    assert lines[1]["group_code"] == "29-1141" and lines[1]["score"] == expected[1].groups[0].score


def test_a_text_file_is_one_text_a_line(tiny_taxonomy):
    job = create(tiny_taxonomy, "\ufeffJava Developer\r\nicu nurse\n".encode(), "t.txt", "")
    done = bulk_job_execute(job_id=job.id)
    rows = result_rows(done)
    assert [(r["text"], r["group_code"]) for r in rows] == [
        ("Java Developer", "15-1252"),
        ("icu nurse", "29-1141"),
    ]


def test_quoted_fields_with_commas_and_newlines_stay_one_row(tiny_taxonomy):
    data = csv_bytes([["title", "note"], ["icu nurse", 'nights, "ward 3"\nsecond line'],
                      ["Head Barista", ""]])  # fmt: skip
    done = bulk_job_execute(job_id=create(tiny_taxonomy, data).id, chunk_rows=1)
    rows = result_rows(done)
    assert [r["note"] for r in rows] == ['nights, "ward 3"\nsecond line', ""]
    assert [r["group_code"] for r in rows] == ["29-1141", "35-3023"]


def test_a_quote_inside_an_unquoted_field_is_text_and_no_row_is_lost(tiny_taxonomy):
    # As a spreadsheet writes inches: the quote is not at a field's start, so it opens nothing.
    data = b'id,title\n1,5" pipe fitter\n2,welder\n3,12" saw operator\n4,icu nurse\n'
    done = bulk_job_execute(job_id=create(tiny_taxonomy, data).id, chunk_rows=1)
    assert (done.status, done.rows_done) == (BulkJob.Status.SUCCEEDED, 4)
    assert [(r["id"], r["title"]) for r in result_rows(done)] == [
        ("1", '5" pipe fitter'), ("2", "welder"), ("3", '12" saw operator'), ("4", "icu nurse"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("line", "quoted", "still"),
    [
        (b'a,"b\n', False, True),  # opens at a field's start
        (b'a,b"c\n', False, False),  # text inside an unquoted field
        (b'"a ""b"" c",d\n', False, False),  # doubled quotes inside, then closed
        (b'x""\n', True, True),  # a doubled quote is one quote: still inside
        (b'end",more\n', True, False),  # the record's open field closes here
        (b'end","open\n', True, True),  # closes, and the next field opens another
    ],
)
def test_a_record_goes_on_past_a_line_only_inside_a_quoted_field(line, quoted, still):
    assert still_quoted(line, quoted) is still
    # Python's csv agrees: the record ends in a quoted field, or is one whole row.
    record = io.StringIO(('"' if quoted else "") + line.decode())
    if still:
        with pytest.raises(csv.Error, match="unexpected end of data"):
            list(csv.reader(record, strict=True))
    else:
        assert len(list(csv.reader(record, strict=True))) == 1


def test_a_row_over_the_record_limit_is_refused_not_read_to_the_end(tiny_taxonomy, monkeypatch):
    monkeypatch.setattr(bulk_files, "MAX_RECORD_BYTES", 4096)
    unclosed = b'title\n"icu nurse\n' + b"head barista\n" * 1000
    with pytest.raises(BulkFileError, match="row starting on line 2 is over 4 KB, or a quote"):
        create(tiny_taxonomy, unclosed)
    with pytest.raises(BulkFileError, match=r"row starting on line 1 is over 4 KB$"):
        create(tiny_taxonomy, b"nurse " * 1000, "t.txt", "")
    assert not BulkJob.objects.exists()


def test_empty_and_unusable_rows_are_kept_with_the_reason(tiny_taxonomy):
    data = csv_bytes([["id", "title"], ["1", "icu nurse"], ["2", "   "], ["3"], ["4", "x" * 300]])
    done = bulk_job_execute(job_id=create(tiny_taxonomy, data).id)
    assert (done.status, done.rows_done, done.rows_failed) == (BulkJob.Status.SUCCEEDED, 4, 3)
    rows = result_rows(done)
    assert [r["id"] for r in rows] == ["1", "2", "3", "4"]
    assert rows[0]["error"] == "" and rows[0]["group_code"] == "29-1141"
    assert rows[1]["error"] == "line 3: title is empty" and rows[1]["group_code"] == ""
    assert rows[2]["error"] == "line 4: title is missing: the row has 1 field(s)"
    assert rows[3]["error"].startswith("line 5: title is longer than 200 characters")


def test_cells_a_spreadsheet_would_run_as_formulas_are_defused(tiny_taxonomy):
    data = csv_bytes([["title", "note"], ["icu nurse", '=HYPERLINK("http://evil","x")'],
                      ["+barista", "-3.5"], ["@head barista", "-cmd|' /C calc'!A0"]])  # fmt: skip
    done = bulk_job_execute(job_id=create(tiny_taxonomy, data).id)
    rows = result_rows(done)
    assert [r["note"] for r in rows] == [
        "'=HYPERLINK(\"http://evil\",\"x\")", "-3.5", "'-cmd|' /C calc'!A0",
    ]  # fmt: skip
    assert [r["title"] for r in rows] == ["icu nurse", "'+barista", "'@head barista"]
    # The JSON Lines file is data, not a spreadsheet: the texts as they came.
    assert jsonl_rows(done)[1]["input"]["title"] == "+barista"


class WorkerDied(BaseException):
    """What a killed worker leaves behind: the job stops between two statements."""


def run_until_the_worker_dies(job: BulkJob, *, after_rows: int | None = None, **options) -> None:
    """Run the job until its worker dies after the checkpoint at ``after_rows`` (the first
    checkpoint when None)."""

    def die(current: BulkJob) -> None:
        if after_rows is None or current.rows_done == after_rows:
            raise WorkerDied

    with pytest.raises(WorkerDied):
        bulk_job_execute(job_id=job.id, after_chunk=die, **options)


def make_stale(job: BulkJob) -> None:
    """The job's heartbeat as old as a dead worker's."""
    silent = timezone.now() - timezone.timedelta(seconds=bulk.stale_seconds() + 1)
    BulkJob.objects.filter(id=job.id).update(heartbeat_at=silent)


def test_a_job_resumes_from_its_checkpoint_after_its_worker_dies(tiny_taxonomy):
    whole = bulk_job_execute(job_id=create(tiny_taxonomy, jobs_csv()).id, chunk_rows=2)
    job = create(tiny_taxonomy, jobs_csv())
    run_until_the_worker_dies(job, after_rows=4, chunk_rows=2)
    job.refresh_from_db()
    assert (job.status, job.rows_done) == (BulkJob.Status.RUNNING, 4)
    assert bulk_job_result(job, "csv") is None  # nothing is offered while half-written
    folder = artifact_path(job.folder)
    # The worker wrote more rows after its last checkpoint before it died: they must not count.
    for name in ("result.csv.part", "result.jsonl.part"):
        with (folder / name).open("ab") as handle:
            handle.write(b"half a row,")
    with pytest.raises(JobBusy):  # its heartbeat is fresh: it may still be alive
        bulk_job_execute(job_id=job.id, chunk_rows=2)
    make_stale(job)
    done = bulk_job_execute(job_id=job.id, chunk_rows=3)
    assert (done.status, done.rows_done, done.attempts) == (BulkJob.Status.SUCCEEDED, 11, 2)
    for kind in ("csv", "jsonl"):
        assert bulk_job_result(done, kind).read_bytes() == bulk_job_result(whole, kind).read_bytes()


def test_a_worker_that_dies_between_renaming_the_two_files_loses_neither(
    tiny_taxonomy, monkeypatch
):
    whole = bulk_job_execute(job_id=create(tiny_taxonomy, jobs_csv()).id)
    job = create(tiny_taxonomy, jobs_csv())
    rename = Path.replace

    def die_after_the_first(self, target):
        rename(self, target)
        if Path(target).name == "result.csv":
            raise WorkerDied

    monkeypatch.setattr(Path, "replace", die_after_the_first)
    with pytest.raises(WorkerDied):
        bulk_job_execute(job_id=job.id)
    monkeypatch.undo()
    folder = artifact_path(job.folder)
    assert (folder / "result.csv").exists() and not (folder / "result.jsonl").exists()
    make_stale(job)
    done = bulk_job_execute(job_id=job.id)
    assert (done.status, done.rows_done) == (BulkJob.Status.SUCCEEDED, 11)
    for kind in ("csv", "jsonl"):
        assert bulk_job_result(done, kind).read_bytes() == bulk_job_result(whole, kind).read_bytes()
    assert {path.name for path in folder.iterdir()} == {"input", "result.csv", "result.jsonl"}


def test_a_worker_that_lost_its_job_while_loading_the_model_writes_nothing(
    tiny_taxonomy, monkeypatch
):
    job = create(tiny_taxonomy, jobs_csv())
    load = bulk_run.engine_for_build

    def slow_load(taxonomy, build):
        # The load took past the heartbeat's limit: another worker claimed the job meanwhile.
        BulkJob.objects.filter(id=job.id).update(attempts=F("attempts") + 1)
        return load(taxonomy, build)

    monkeypatch.setattr(bulk_run, "engine_for_build", slow_load)
    assert bulk_job_execute(job_id=job.id) is None
    assert not list(artifact_path(job.folder).glob("result*"))  # the other worker's to write
    assert BulkJob.objects.get(id=job.id).status == BulkJob.Status.RUNNING


def test_a_worker_that_lost_its_job_does_not_fail_the_worker_that_took_it(
    tiny_taxonomy, monkeypatch
):
    job = create(tiny_taxonomy, jobs_csv())

    def lose_then_break(taxonomy, build):
        # Its chunk was taken over by another worker (this one was silent too long).
        BulkChunk.objects.filter(job=job).update(attempts=F("attempts") + 1)
        raise ArtifactError("weights.pt is truncated")

    monkeypatch.setattr(bulk_run, "engine_for_build", lose_then_break)
    bulk_job_execute(job_id=job.id)
    job.refresh_from_db()
    assert (job.status, job.error) == (BulkJob.Status.RUNNING, "")
    assert list(job.chunks.values_list("status", "attempts")) == [("running", 2)]


def test_what_a_given_up_worker_writes_after_its_job_was_cancelled_does_not_stay(
    tiny_taxonomy, monkeypatch
):
    # The worker was silent long enough to be given up on and its job cancelled (nothing to
    # delete yet), but it was alive: it goes on to open its result files and write a chunk.
    job = create(tiny_taxonomy, jobs_csv())
    read_header = bulk_run.read_header

    def cancelled_meanwhile(*args, **kwargs):
        make_stale(job)
        assert bulk_job_cancel(job=job).status == BulkJob.Status.CANCELLED
        return read_header(*args, **kwargs)

    monkeypatch.setattr(bulk_run, "read_header", cancelled_meanwhile)
    done = bulk_job_execute(job_id=job.id, chunk_rows=2)
    assert (done.status, done.rows_done) == (BulkJob.Status.CANCELLED, 0)
    assert not list(artifact_path(done.folder).glob("result*"))


def test_a_worker_that_lost_its_job_leaves_the_files_to_the_one_that_took_it(tiny_taxonomy):
    job = create(tiny_taxonomy, jobs_csv())

    def taken_over(current: BulkJob) -> None:  # after the last chunk, as another worker claims it
        BulkJob.objects.filter(id=job.id).update(attempts=F("attempts") + 1)

    assert bulk_job_execute(job_id=job.id, after_chunk=taken_over) is None
    folder = artifact_path(job.folder)
    assert not list(folder.glob("result*"))  # the results are the other worker's to join
    assert sorted(path.name for path in (folder / "chunks").iterdir()) == [
        "0000000.1.csv", "0000000.1.jsonl",
    ]  # fmt: skip
    assert BulkJob.objects.get(id=job.id).status == BulkJob.Status.RUNNING


def test_a_cancel_that_lands_while_the_files_are_renamed_leaves_none(tiny_taxonomy, monkeypatch):
    # The worker was silent long enough to be given up on; a curator cancels the job just as
    # the worker, alive after all, renames its finished files.
    job = create(tiny_taxonomy, jobs_csv())
    rename = Path.replace

    def cancelled_first(self, target):
        joined = self.name.startswith("result.csv.") and self.name.endswith(".part")
        if joined and BulkJob.objects.get(id=job.id).status == "running":
            make_stale(job)
            bulk_job_cancel(job=job)  # deletes both .part files
        return rename(self, target)

    monkeypatch.setattr(Path, "replace", cancelled_first)
    done = bulk_job_execute(job_id=job.id)
    assert done.status == BulkJob.Status.CANCELLED
    assert not list(artifact_path(done.folder).glob("result*"))


def test_a_resumed_job_whose_partial_result_vanished_fails_instead_of_padding_it(tiny_taxonomy):
    job = create(tiny_taxonomy, jobs_csv())
    run_until_the_worker_dies(job, after_rows=4, chunk_rows=2)
    (artifact_path(job.folder) / "chunks" / "0000000.1.csv").unlink()  # rows 1 and 2's
    make_stale(job)
    done = bulk_job_execute(job_id=job.id, chunk_rows=2)
    assert done.status == BulkJob.Status.FAILED
    assert re.match(
        rf"the results of lines 2 to 3 of bulk job {job.id} are gone from its folder", done.error
    )
    assert bulk_job_result(done, "csv") is None


def test_every_row_is_answered_by_the_version_live_when_the_job_started(tiny_taxonomy):
    job = create(tiny_taxonomy, jobs_csv())
    promoted = []

    def promote_a_new_version(current: BulkJob) -> None:
        if not promoted:
            promoted.append(build_live_model(tiny_taxonomy))

    done = bulk_job_execute(job_id=job.id, chunk_rows=4, after_chunk=promote_a_new_version)
    assert rank_taxonomy_groups(tiny_taxonomy, ["icu nurse"], k=1)[0].model_version == "jobs/v2"
    assert {row["model_version"] for row in result_rows(done)} == {"jobs/v1"}
    assert done.model_version.label == "jobs/v1"


def test_a_queued_job_is_cancelled_at_once(tiny_taxonomy):
    job = bulk_job_cancel(job=create(tiny_taxonomy, jobs_csv()))
    assert job.status == BulkJob.Status.CANCELLED
    assert bulk_job_execute(job_id=job.id) is None
    with pytest.raises(BulkStateError, match="was cancelled: there is nothing to stop"):
        bulk_job_cancel(job=job)


def test_a_running_job_stops_after_its_chunk_and_leaves_no_result(tiny_taxonomy):
    job = create(tiny_taxonomy, jobs_csv())

    def cancel(current: BulkJob) -> None:
        bulk_job_cancel(job=current)

    done = bulk_job_execute(job_id=job.id, chunk_rows=2, after_chunk=cancel)
    assert (done.status, done.rows_done) == (BulkJob.Status.CANCELLED, 2)
    assert not list(artifact_path(done.folder).glob("result*"))


def test_a_cancel_after_the_last_chunk_wins_over_finishing(tiny_taxonomy):
    job = create(tiny_taxonomy, jobs_csv())

    def cancel(current: BulkJob) -> None:
        bulk_job_cancel(job=current)

    done = bulk_job_execute(job_id=job.id, after_chunk=cancel)  # one chunk: the last
    assert (done.status, done.rows_done) == (BulkJob.Status.CANCELLED, 11)
    assert bulk_job_result(done, "csv") is None
    assert not list(artifact_path(done.folder).glob("result*"))


def test_a_retry_clears_a_cancel_asked_before_it(tiny_taxonomy):
    job = create(tiny_taxonomy, jobs_csv())
    BulkJob.objects.filter(id=job.id).update(
        status=BulkJob.Status.FAILED, error="disk full", cancel_requested=True
    )
    job = bulk_job_retry(job=job)
    done = bulk_job_execute(job_id=job.id, chunk_rows=2)
    assert (done.status, done.rows_done) == (BulkJob.Status.SUCCEEDED, 11)


def test_a_failed_job_is_retried_from_its_checkpoint(tiny_taxonomy):
    job = create(tiny_taxonomy, jobs_csv())
    with pytest.raises(BulkStateError, match="only a failed job"):
        bulk_job_retry(job=job)
    BulkJob.objects.filter(id=job.id).update(status=BulkJob.Status.FAILED, error="disk full")
    job = bulk_job_retry(job=job)
    assert (job.status, job.error) == (BulkJob.Status.QUEUED, "")
    assert bulk_job_execute(job_id=job.id).status == BulkJob.Status.SUCCEEDED


@pytest.mark.parametrize(
    ("data", "filename", "column", "message"),
    [
        (b"title\nnurse\n", "jobs.xlsx", "title", "neither a .csv nor a .txt file"),
        (b"", "jobs.csv", "title", "jobs.csv is empty"),
        (b"title\n", "jobs.csv", "title", "jobs.csv holds no rows"),
        (b"id,title\n1,nurse\n", "jobs.csv", "job", "has no column 'job'; its columns are 'id', "),
        (b"title\nnurse\ncaf\xe9\n", "jobs.csv", "title", "is not UTF-8: line 3 (byte 15)"),
        (b"\xff\xfet\x00", "jobs.txt", "", "UTF-16 text; save it as UTF-8"),
        (b'title\n"nurse\n', "jobs.csv", "title", "a quote opened on line 2 is never closed"),
        # Past the first row, in a file small enough to be read whole before it is accepted:
        # it once was queued and then failed in the worker.
        (b'title\nnurse\nbarista\n"trucker\n', "jobs.csv", "title", "on line 4 is never closed"),
        (b"title,title\nnurse,x\n", "jobs.csv", "title", "'title' 2 times (columns 1, 2)"),
        (b"ti\xe9tle\nnurse\n", "jobs.csv", "title", "is not UTF-8: line 1 (byte 2)"),
        # A spreadsheet's "CSV" in many locales: read with commas, one column of whole lines.
        (b"id;title\n1;nurse\n", "jobs.csv", "id;title",
         "jobs.csv's header row 'id;title' seems separated by semicolons, not commas: save the "
         "file as comma-separated CSV"),
        (b"id\ttitle\n1\tnurse\n", "jobs.csv", "title", "seems separated by tabs, not commas"),
    ],
)  # fmt: skip
def test_a_file_it_cannot_read_is_refused_with_the_reason(
    tiny_taxonomy, data, filename, column, message
):
    with pytest.raises(BulkFileError, match=re.escape(message)):
        create(tiny_taxonomy, data, filename, column)
    assert not BulkJob.objects.exists()
    assert not list(Path(artifact_path("bulk")).glob("*/input"))


def test_a_file_over_the_size_limit_is_refused_and_not_kept(tiny_taxonomy, settings):
    settings.SIAMWEB_BULK_MAX_BYTES = 1024
    with pytest.raises(BulkFileError, match="is over 1 KB, the largest file a bulk job takes"):
        create(tiny_taxonomy, b"title\n" + b"icu nurse\n" * 200)
    assert not list(Path(artifact_path("bulk")).glob("*/input"))


def test_a_taxonomy_without_a_live_model_is_refused(db):
    taxonomy = taxonomy_import(slug="bare", path=TINY_CSV, fmt="csv", name="Bare").taxonomy
    with pytest.raises(NoLiveModel, match="'bare' has no live model yet"):
        create(taxonomy, jobs_csv())


def test_a_job_whose_taxonomy_lost_its_live_model_before_it_started_fails_saying_so(
    tiny_taxonomy,
):
    job = create(tiny_taxonomy, jobs_csv())
    Deployment.objects.filter(taxonomy=tiny_taxonomy).delete()
    done = bulk_job_execute(job_id=job.id)
    assert done.status == BulkJob.Status.FAILED
    assert "'jobs' has no live model yet" in done.error
    assert bulk_job_result(done, "csv") is None and done.rows_done == 0


def test_a_row_past_the_first_check_that_is_not_utf8_is_kept_with_the_reason(
    tiny_taxonomy, monkeypatch
):
    # One bad byte deep in a file of millions costs its row, not the job.
    monkeypatch.setattr(bulk, "_HEAD_BYTES", 16)  # the upload's check reads this far only
    data = b"title\nicu nurse\nhead barista\ncaf\xe9 owner\nnurse\n"
    done = bulk_job_execute(job_id=create(tiny_taxonomy, data).id, chunk_rows=1)
    assert (done.status, done.rows_done, done.rows_failed) == (BulkJob.Status.SUCCEEDED, 4, 1)
    rows = result_rows(done)
    assert [r["group_code"] for r in rows] == ["29-1141", "35-3023", "", "29-1141"]
    assert rows[2]["title"] == "caf\\xe9 owner"
    assert rows[2]["error"] == "line 4: not UTF-8 (byte 32 holds b'\\xe9 ow'; shown as \\xNN)"
    assert [line["error"] for line in jsonl_rows(done)] == [r["error"] for r in rows]


def test_a_row_with_more_fields_than_the_header_is_kept_without_shifting_a_column(
    tiny_taxonomy,
):
    data = b"id,title\n1,nurse,EXTRA1,EXTRA2\n2,icu nurse,\n3,head barista\n"
    done = bulk_job_execute(job_id=create(tiny_taxonomy, data).id)
    assert (done.status, done.rows_done, done.rows_failed) == (BulkJob.Status.SUCCEEDED, 3, 1)
    with bulk_job_result(done, "csv").open(encoding="utf-8", newline="") as handle:
        table = list(csv.reader(handle))
    assert {len(row) for row in table} == {2 + len(RESULT_COLUMNS)}
    rows = result_rows(done)
    assert (rows[0]["id"], rows[0]["title"], rows[0]["group_code"]) == ("1", "nurse", "")
    assert rows[0]["error"] == (
        "line 2: the row has 4 fields where the header has 2, so its columns may be shifted; "
        "the extra ones were 'EXTRA1', 'EXTRA2'"
    )
    # An empty field past the header's (a trailing comma) loses nothing: the row is answered.
    assert [(r["group_code"], r["error"]) for r in rows[1:]] == [("29-1141", ""), ("35-3023", "")]
    assert [line["input"] for line in jsonl_rows(done)] == [
        {"id": "1", "title": "nurse"}, {"id": "2", "title": "icu nurse"},
        {"id": "3", "title": "head barista"},
    ]  # fmt: skip


def test_a_stray_quote_is_read_as_a_spreadsheet_reads_it_and_said(tiny_taxonomy):
    data = b'id,title\n1,"icu" nurse\n2,head barista\n'
    done = bulk_job_execute(job_id=create(tiny_taxonomy, data).id)
    assert (done.status, done.rows_failed) == (BulkJob.Status.SUCCEEDED, 1)
    rows = result_rows(done)
    assert (rows[0]["title"], rows[0]["group_code"]) == ("icu nurse", "")
    assert rows[0]["error"] == "line 2: not valid CSV (',' expected after '\"')"
    assert (rows[1]["group_code"], rows[1]["error"]) == ("35-3023", "")


def test_repeated_empty_and_spaced_column_names_keep_every_cell(tiny_taxonomy):
    data = b"id,note, title ,note,\n1,a,icu nurse,b,c\n"
    done = bulk_job_execute(job_id=create(tiny_taxonomy, data, column="title").id)
    with bulk_job_result(done, "csv").open(encoding="utf-8", newline="") as handle:
        header, row = list(csv.reader(handle))
    assert header[:5] == ["id", "note", " title ", "note", ""]  # the file's own names
    assert row[:5] == ["1", "a", "icu nurse", "b", "c"] and row[5] == "29-1141"
    # JSON keys must be unique: a repeated or empty name is told apart by its position.
    assert jsonl_rows(done)[0]["input"] == {
        "id": "1", "note (column 2)": "a", " title ": "icu nurse", "note (column 4)": "b",
        "column 5": "c",
    }  # fmt: skip


def test_a_column_whose_name_holds_inner_spaces_can_be_chosen_as_the_page_lists_it(
    tiny_taxonomy,
):
    # The typed name is kept as every text is (spaces collapsed): so is the header's, to match.
    data = "id,Job  Title,Soft\u00adhyphen\n1,icu nurse,x\n".encode()
    done = bulk_job_execute(job_id=create(tiny_taxonomy, data, column="Job  Title").id)
    assert done.status == "succeeded", done.error
    assert result_rows(done)[0]["group_code"] == "29-1141"
    other = create(tiny_taxonomy, data, column="Soft\u00adhyphen")
    assert other.column == "Softhyphen"
    assert bulk_job_execute(job_id=other.id).status == "succeeded"


def test_a_column_named_for_a_text_file_is_ignored(tiny_taxonomy):
    job = create(tiny_taxonomy, b"icu nurse\n", "t.txt", column="title")
    assert job.column == ""
    assert result_rows(bulk_job_execute(job_id=job.id))[0]["group_code"] == "29-1141"


def test_a_finished_job_is_deleted_with_its_upload_and_results(tiny_taxonomy):
    running = create(tiny_taxonomy, jobs_csv())
    with pytest.raises(BulkStateError, match="is queued: cancel it first"):
        bulk_job_delete(job=running)
    assert (artifact_path(running.folder) / "input").exists()
    done = bulk_job_execute(job_id=running.id)
    folder = artifact_path(done.folder)
    assert {path.name for path in folder.iterdir()} == {"input", "result.csv", "result.jsonl"}
    bulk_job_delete(job=done)
    assert not BulkJob.objects.exists() and not folder.exists()
    bulk_job_delete(job=done)  # deleted twice (two tabs): nothing left to say


def test_jobs_past_their_keep_are_deleted_by_the_beat_task(tiny_taxonomy, settings):
    beat = settings.CELERY_BEAT_SCHEDULE["delete-bulk-jobs-past-their-keep"]
    assert beat["task"] == delete_expired_bulk_jobs.name
    settings.SIAMWEB_BULK_KEEP_DAYS = 30
    ended = {}
    for name, days_ago in (("old", 31), ("recent", 29), ("old_failed", 40)):
        job = bulk_job_execute(job_id=create(tiny_taxonomy, jobs_csv()).id)
        when = timezone.now() - timezone.timedelta(days=days_ago)
        BulkJob.objects.filter(id=job.id).update(finished_at=when)
        ended[name] = job
    BulkJob.objects.filter(id=ended["old_failed"].id).update(status=BulkJob.Status.FAILED)
    queued = create(tiny_taxonomy, jobs_csv())
    settings.SIAMWEB_BULK_KEEP_DAYS = 0  # kept until deleted by hand
    assert delete_expired_bulk_jobs.run() == 0
    settings.SIAMWEB_BULK_KEEP_DAYS = 30
    assert delete_expired_bulk_jobs.run() == 2
    assert set(BulkJob.objects.values_list("id", flat=True)) == {ended["recent"].id, queued.id}
    assert not artifact_path(ended["old"].folder).exists()
    assert artifact_path(ended["recent"].folder).exists()
    kept_until = bulk_job_expires(BulkJob.objects.get(id=ended["recent"].id))
    assert timezone.now() < kept_until < timezone.now() + timezone.timedelta(days=2)
    assert bulk_job_expires(queued) is None


def test_a_worker_whose_job_was_deleted_under_it_stops_quietly(tiny_taxonomy):
    # Given up on as dead, cancelled and deleted, but alive: its next checkpoint finds no job.
    job = create(tiny_taxonomy, jobs_csv())

    def given_up_and_deleted(current: BulkJob) -> None:
        if current.rows_done == 2:
            make_stale(current)
            bulk_job_delete(job=bulk_job_cancel(job=current))

    done = bulk_job_execute(job_id=job.id, chunk_rows=2, after_chunk=given_up_and_deleted)
    assert done is None and not BulkJob.objects.exists()
    assert not artifact_path(job.folder).exists()


def test_a_row_with_a_bare_carriage_return_is_kept_whole(tiny_taxonomy):
    done = bulk_job_execute(job_id=create(tiny_taxonomy, b"id,title\n1,a\rb\n2,icu nurse\n").id)
    rows = result_rows(done)
    assert (rows[0]["id"], rows[0]["title"], rows[0]["group_code"]) == ("1,a\rb", "", "")
    assert rows[0]["error"].startswith("line 2: not valid CSV (a carriage return inside an")
    assert rows[0]["error"].endswith("the row is kept whole in the first column")
    assert (rows[1]["group_code"], done.rows_failed) == ("29-1141", 1)
    with pytest.raises(BulkFileError, match=r"its header row is not valid CSV \(a carriage return"):
        create(tiny_taxonomy, b"id,title\r1,icu nurse\r2,welder\r")  # old Mac line ends


def test_a_field_longer_than_csv_reads_keeps_its_row_whole(tiny_taxonomy):
    note = "n" * 200_000  # csv refuses a field over 131,072 characters
    data = csv_bytes([["title", "note"], ["icu nurse", "short"], ["head barista", note]])
    rows = jsonl_rows(bulk_job_execute(job_id=create(tiny_taxonomy, data).id))
    assert (rows[0]["group_code"], rows[0]["error"]) == ("29-1141", "")
    assert rows[1]["input"] == {"title": f"head barista,{note}", "note": ""}
    assert rows[1]["error"] == (
        "line 3: not valid CSV (a field over 131,072 characters); the row is kept whole in the "
        "first column"
    )


def test_a_row_with_two_problems_names_both(tiny_taxonomy, monkeypatch):
    monkeypatch.setattr(bulk, "_HEAD_BYTES", 16)
    data = b"id,title\n1,icu nurse\n2,caf\xe9,extra\n"
    rows = result_rows(bulk_job_execute(job_id=create(tiny_taxonomy, data).id))
    assert rows[1]["error"] == (
        "line 3: not UTF-8 (byte 26 holds b'\\xe9,ex'; shown as \\xNN); the row has 3 fields "
        "where the header has 2, so its columns may be shifted; the extra ones were 'extra'"
    )


def test_json_keys_stay_unique_whatever_the_header_names(tiny_taxonomy):
    data = b"title,,column 2,note,note,note (column 4)\nicu nurse,a,b,c,d,e\n"
    (line,) = jsonl_rows(bulk_job_execute(job_id=create(tiny_taxonomy, data).id))
    assert sorted(line["input"].values()) == ["a", "b", "c", "d", "e", "icu nurse"]
    assert line["input"]["column 2"] == "b" and line["input"]["note (column 4)"] == "e"


def test_a_job_that_ended_again_after_it_was_listed_for_deletion_is_kept(tiny_taxonomy):
    done = bulk_job_execute(job_id=create(tiny_taxonomy, jobs_csv()).id)
    listed_before = timezone.now() - timezone.timedelta(days=30)  # it ended after this
    assert bulk_job_delete(job=done, ended_before=listed_before) is False
    assert BulkJob.objects.filter(id=done.id).exists()
    assert (artifact_path(done.folder) / "result.csv").exists()


def test_a_stopping_job_is_deleted_once_it_has_stopped(tiny_taxonomy):
    job = create(tiny_taxonomy, jobs_csv())
    BulkJob.objects.filter(id=job.id).update(status="running", heartbeat_at=timezone.now())
    stopping = bulk_job_cancel(job=job)
    with pytest.raises(BulkStateError, match="is stopping: delete it once it has stopped"):
        bulk_job_delete(job=stopping)


def test_a_worker_that_lost_its_job_sends_no_more_rows_for_review(tiny_taxonomy):
    job = create(tiny_taxonomy, jobs_csv(), review_margin_below=1.0)  # every row goes

    def given_up(current: BulkJob) -> None:
        if current.rows_done == 2:
            make_stale(current)
            bulk_job_cancel(job=current)

    done = bulk_job_execute(job_id=job.id, chunk_rows=2, after_chunk=given_up)
    assert done.status == BulkJob.Status.CANCELLED
    assert ReviewItem.objects.count() == 2  # the first chunk's; the next was not its to send


def test_a_job_another_worker_runs_is_not_taken_twice(tiny_taxonomy):
    job = create(tiny_taxonomy, jobs_csv())
    BulkJob.objects.filter(id=job.id).update(
        status=BulkJob.Status.RUNNING, heartbeat_at=timezone.now()
    )
    with pytest.raises(JobBusy):
        bulk_job_execute(job_id=job.id)
    assert bulk_job_execute(job_id=job.id + 1000) is None


def test_a_title_seen_again_after_a_member_was_added_finds_the_new_member(tiny_taxonomy):
    # The job keeps the nearest members of titles it has seen; a member added since must not
    # be hidden from a title it sees again.
    data = csv_bytes([["title"], ["ice road trucker"], ["icu nurse"], ["ice road trucker"]])
    job = create(tiny_taxonomy, data)

    def add_member(current: BulkJob) -> None:
        if current.rows_done == 1:
            Member.objects.create(
                taxonomy=tiny_taxonomy,
                group=Group.objects.get(taxonomy=tiny_taxonomy, code="53-3032"),
                text="Ice Road Trucker",
                normalized_text=comparison_key("Ice Road Trucker"),
            )

    done = bulk_job_execute(job_id=job.id, chunk_rows=1, after_chunk=add_member)
    first, _, again = result_rows(done)
    assert first["matched_member"] != "Ice Road Trucker"
    assert (again["matched_member"], again["group_code"]) == ("Ice Road Trucker", "53-3032")


def test_the_beat_check_queues_again_a_job_whose_worker_died(tiny_taxonomy):
    job = create(tiny_taxonomy, jobs_csv())
    busy = create(tiny_taxonomy, jobs_csv())
    run_until_the_worker_dies(job, chunk_rows=4)
    make_stale(job)
    BulkJob.objects.filter(id=busy.id).update(status="running", heartbeat_at=timezone.now())
    assert resume_stale_bulk_jobs.run() == 1
    job.refresh_from_db()
    assert (job.status, job.rows_done) == (BulkJob.Status.QUEUED, 4)
    assert BulkJob.objects.get(id=busy.id).status == BulkJob.Status.RUNNING
    done = bulk_job_execute(job_id=job.id)
    assert (done.status, done.rows_done, done.attempts) == (BulkJob.Status.SUCCEEDED, 11, 2)


def test_rows_the_model_answers_below_the_threshold_also_go_to_the_review_queue(tiny_taxonomy):
    # The threshold reads the chance the card shows (the probability), not the similarity.
    answers = rank_taxonomy_groups(tiny_taxonomy, TITLES, k=1)
    chances = {a.text: a.groups[0].probability for a in answers}
    threshold = sorted(chances.values())[4]  # the four least likely titles fall below it
    job = create(tiny_taxonomy, jobs_csv(), review_below=threshold)
    done = bulk_job_execute(job_id=job.id, chunk_rows=3)
    low = sorted(text for text, chance in chances.items() if chance < threshold)
    assert len(low) == 4 and done.rows_queued == 4
    queued = ReviewItem.objects.filter(taxonomy=tiny_taxonomy).values_list("input__text", flat=True)
    assert sorted(queued) == low
    assert Input.objects.get(text=low[0]).source == Input.Source.UPLOAD


def test_one_job_sends_at_most_the_cap_for_review_and_counts_the_rest(
    tiny_taxonomy, settings, client, curator
):
    """review_below=1 sends every row the product is not certain of (300 of 300 once); a 1 GiB
    file would queue millions."""
    answers = rank_taxonomy_groups(tiny_taxonomy, TITLES, k=1)
    qualified = sum(answer.groups[0].probability < 1.0 for answer in answers)
    assert qualified > 3
    settings.SIAMWEB_BULK_REVIEW_MAX_ROWS = 3
    job = create(tiny_taxonomy, jobs_csv(), review_below=1.0, user=curator)
    done = bulk_job_execute(job_id=job.id, chunk_rows=2)
    assert (done.rows_queued, done.rows_not_queued) == (3, qualified - 3)
    assert ReviewItem.objects.filter(taxonomy=tiny_taxonomy).count() == 3
    client.force_login(curator)
    page = client.get(f"/bulk/{job.id}/").content.decode()
    assert f"{qualified - 3} more qualified: the queue takes at most 3 rows from one job" in page


def test_without_a_threshold_nothing_goes_to_the_review_queue(tiny_taxonomy):
    done = bulk_job_execute(job_id=create(tiny_taxonomy, jobs_csv()).id)
    assert done.rows_queued == 0 and not ReviewItem.objects.exists()


def test_rows_the_model_answers_by_a_thin_margin_also_go_to_the_review_queue(tiny_taxonomy):
    answers = rank_taxonomy_groups(tiny_taxonomy, TITLES, k=2)
    margins = {a.text: a.groups[0].probability - a.groups[1].probability for a in answers}
    threshold = sorted(margins.values())[3]  # the three closest calls fall below it
    job = create(tiny_taxonomy, jobs_csv(), review_margin_below=threshold)
    done = bulk_job_execute(job_id=job.id, chunk_rows=4)
    close = sorted(text for text, margin in margins.items() if margin < threshold)
    assert len(close) == 3 and done.rows_queued == 3
    queued = ReviewItem.objects.filter(taxonomy=tiny_taxonomy).values_list("input__text", flat=True)
    assert sorted(queued) == close
    # The result's margin column is the one the threshold read.
    margin_of = {row["title"]: float(row["margin"]) for row in result_rows(done)}
    assert all(margin_of[text] <= round(threshold, 4) for text in close)
