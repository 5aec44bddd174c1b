"""The Models pages: curators and admins see the live version, every version and the runs; only
admins fine-tune, roll back, force a promotion or retry; a run's gate and flip reports; the runs
region polls only while a run is active."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from annotations.models import AuditEvent, Taxonomy
from models_app.models import Deployment, ModelVersion, TrainingRun
from models_app.promotion import promotion_finish
from models_app.services import training_run_execute, training_run_request
from tests.conftest import TINY_MODEL

HTMX = {"HTTP_HX_REQUEST": "true"}
POLLING = 'hx-trigger="every 2s"'


def gate_metric(name, suite, before, after, *, n, lost, gained, p, passed, why, against=None):
    row = {
        "name": name, "suite": suite, "candidate": after, "delta": round(after - before, 4),
        "n": n, "lost": lost, "gained": gained, "p_worse": p, "alpha": 0.0125,
        "ci95": [round(after - before - 0.02, 4), round(after - before + 0.02, 4)],
        "significantly_worse": not passed, "passed": passed, "why": why,
        "reference" if against else "live": before,
    }  # fmt: skip
    return {**row, "against": against} if against else row


GATE_REPORT = {
    "test": "McNemar exact, one-sided, paired on the same cases",
    "alpha": 0.05,
    "alpha_per_test": 0.0125,
    "reference_version": "jobs/v1",
    "decision": "reject",
    "reasons": [
        "typos fell by 0.050 (60 lost, 10 gained of 1000; p = 0.0000, below 0.0125): "
        "significantly worse",
        "extra_words fell by 0.015 since jobs/v1 (25 lost, 10 gained of 1000; p = 0.0083, "
        "below 0.0125): significantly worse",
    ],
    "metrics": [
        gate_metric(
            "typos",
            "frozen",
            0.9,
            0.85,
            n=1000,
            lost=60,
            gained=10,
            p=0.0,
            passed=False,
            why="typos fell by 0.050: significantly worse",
        ),
        gate_metric(
            "composition",
            "frozen",
            0.8,
            0.82,
            n=1000,
            lost=5,
            gained=25,
            p=0.9999,
            passed=True,
            why="composition rose by 0.020: within noise or better",
        ),
        gate_metric(
            "extra_words",
            "drift",
            0.93,
            0.915,
            n=1000,
            lost=25,
            gained=10,
            p=0.0083,
            passed=False,
            why="extra_words fell by 0.015 since jobs/v1",
            against="jobs/v1",
        ),
        gate_metric(
            "held_out_feedback",
            "feedback",
            0.5,
            0.75,
            n=4,
            lost=0,
            gained=1,
            p=1.0,
            passed=True,
            why="held_out_feedback rose by 0.250: within noise or better",
        ),
    ],
    "verdicts": {"count": 12, "live": 0.5, "candidate": 0.75, "rose": True},
    "new_verdicts": 12,
    "stage_seconds": {"learn": 135.2, "held_out": 14.0, "catch_up": 45.1, "index": 6.3},
}


def flip_row(text: str, *, before: str, after: str, curator: str | None, confirmed: bool) -> dict:
    def ref(code: str | None) -> dict | None:
        return None if code is None else {"code": code, "name": f"Group {code}"}

    return {
        "input": text,
        "before": ref(before),
        "after": ref(after),
        "curator": ref(curator),
        "verdict": ("confirm" if confirmed else "reassign") if curator else None,
        "confirmed": confirmed,
    }


FLIP_REPORT = {
    "compared": 40,
    "counts": {"fixed": 1, "broken": 205, "changed": 1, "confirmed_now_wrong": 2},
    "fixed": [
        flip_row(
            "java coder", before="35-3023", after="15-1252", curator="15-1252", confirmed=False
        )
    ],
    # Stored unconfirmed first: the page must still put the confirmed ones on top.
    "broken": [
        flip_row(
            "barista trainee", before="35-3023", after="29-1141", curator=None, confirmed=False
        ),
        flip_row("icu nurse", before="29-1141", after="35-3023", curator="29-1141", confirmed=True),
        flip_row(
            "senior java dev", before="15-1252", after="35-3023", curator="15-1252", confirmed=True
        ),
    ],
    "changed": [
        flip_row("chef de partie", before="35-2014", after="35-3023", curator=None, confirmed=False)
    ],
}


def live_version_id(taxonomy: Taxonomy) -> int:
    return Deployment.objects.get(taxonomy=taxonomy).index_build.model_version_id


def snapshot() -> tuple:
    return (
        sorted(TrainingRun.objects.values_list("id", "kind", "status", "gate_report")),
        sorted(Deployment.objects.values_list("taxonomy_id", "index_build_id")),
        AuditEvent.objects.count(),
    )


def make_run(taxonomy: Taxonomy, **fields) -> TrainingRun:
    defaults = {"kind": TrainingRun.Kind.FINETUNE, "status": TrainingRun.Status.RUNNING}
    return TrainingRun.objects.create(taxonomy=taxonomy, **{**defaults, **fields})


@pytest.fixture
def first_version(tiny_taxonomy) -> ModelVersion:
    return ModelVersion.objects.get(taxonomy=tiny_taxonomy, number=1)


@pytest.fixture
def older_version(first_version) -> ModelVersion:
    """jobs/v2 as a row (never loaded), not live: what a rollback can go back to."""
    return ModelVersion.objects.create(
        taxonomy=first_version.taxonomy,
        number=2,
        encoder_kind="char_ngram_tfidf",
        artifact_path="jobs/models/none",
        parent=first_version,
        metrics={"suite": {"mean_accuracy": 0.5, "typos/accuracy": 0.625}},
    )


@pytest.fixture
def rejected_finetune(first_version) -> TrainingRun:
    """A fine-tune the gate rejected, with a real candidate (jobs/v2) and its index."""
    build = training_run_request(
        taxonomy=first_version.taxonomy,
        kind=TrainingRun.Kind.BUILD,
        config=TINY_MODEL,
        activate=False,
        enqueue=False,
    )
    build = training_run_execute(run_id=build.id)
    assert build.status == TrainingRun.Status.SUCCEEDED, build.error
    return make_run(
        first_version.taxonomy,
        status=TrainingRun.Status.REJECTED,
        stage="done",
        progress=1.0,
        parent_version=first_version,
        model_version=build.model_version,
        index_build=build.index_build,
        gate_report=GATE_REPORT,
        finished_at=timezone.now(),
    )


@pytest.fixture
def failed_run(tiny_taxonomy) -> TrainingRun:
    return make_run(
        tiny_taxonomy,
        kind=TrainingRun.Kind.REINDEX,
        status=TrainingRun.Status.FAILED,
        stage="encode",
        progress=0.4,
        error="MemoryError: the index did not fit",
        finished_at=timezone.now(),
    )


def admin_actions(run_id: int, version_id: int) -> list[tuple[str, str]]:
    return [
        ("post", "/models/jobs/finetune"),
        ("get", f"/models/versions/{version_id}/rollback"),
        ("post", f"/models/versions/{version_id}/rollback"),
        ("get", f"/models/runs/{run_id}/promote"),
        ("post", f"/models/runs/{run_id}/promote"),
        ("post", f"/models/runs/{run_id}/retry"),
    ]


# --- who may see and do what ------------------------------------------------------------------


def test_anonymous_visitors_are_sent_to_log_in(client, older_version, failed_run):
    pages = [("get", "/models/"), ("get", f"/models/runs/{failed_run.id}/")]
    for method, url in [*pages, *admin_actions(failed_run.id, older_version.id)]:
        response = getattr(client, method)(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/?next="), url


def test_a_signed_in_user_without_a_role_gets_403(client, user_model, failed_run):
    client.force_login(user_model.objects.create_user(username="sam", password="x-pass-123"))
    assert client.get("/models/").status_code == 403
    assert client.get(f"/models/runs/{failed_run.id}/").status_code == 403


def test_a_curator_sees_the_live_version_the_versions_and_the_runs(client, curator, older_version):
    client.force_login(curator)
    response = client.get("/models/")
    assert response.status_code == 200
    page = response.content.decode()
    assert response.context["taxonomy"].slug == "jobs"
    assert response.context["live"].label == "jobs/v1"
    assert 'data-testid="live-label"><strong>jobs/v1</strong>' in page
    assert "char_ngram_tfidf" in page
    # The live version's stored frozen-suite metrics, one row per test set.
    suite = older_version.parent.metrics["suite"]
    assert [row.name for row in response.context["live_suite"]] == [
        "Typos",
        "Composition",
        "Extra words",
    ]
    assert f"{suite['mean_accuracy']:.3f}" in page
    versions = [(row.version.label, row.is_live) for row in response.context["versions"]]
    assert versions == [("jobs/v2", False), ("jobs/v1", True)]
    assert page.count('data-testid="live-badge"') == 1
    assert "0.625" in page  # jobs/v2's typos accuracy
    runs = response.context["runs"]
    assert [(row.run.kind, row.run.status) for row in runs] == [("build", "succeeded")]
    # Curators see no admin button.
    assert "Fine-tune now" not in page
    assert "Roll back to this version" not in page


def test_an_admin_gets_fine_tune_now_and_a_rollback_on_every_version_but_the_live_one(
    client, admin_user, older_version
):
    client.force_login(admin_user)
    page = client.get("/models/").content.decode()
    assert 'data-testid="finetune">Fine-tune now</button>' in page
    rows = re.findall(r'<tr data-testid="version-row" data-label="([^"]+)"(.*?)</tr>', page, re.S)
    assert [(label, "Roll back to this version" in row) for label, row in rows] == [
        ("jobs/v2", True),
        ("jobs/v1", False),
    ]
    assert f'href="/models/versions/{older_version.id}/rollback"' in page


def test_a_curator_gets_403_on_every_admin_action_and_changes_nothing(
    client, curator, older_version, failed_run
):
    client.force_login(curator)
    before = snapshot()
    for method, url in admin_actions(failed_run.id, older_version.id):
        response = getattr(client, method)(url)
        assert response.status_code == 403, url
    assert snapshot() == before


def test_a_curator_cannot_promote_a_rejected_candidate(client, curator, rejected_finetune):
    client.force_login(curator)
    before = snapshot()
    response = client.post(f"/models/runs/{rejected_finetune.id}/promote")
    assert response.status_code == 403
    assert snapshot() == before
    assert live_version_id(rejected_finetune.taxonomy) == rejected_finetune.parent_version_id


def test_the_page_switches_taxonomy_and_shows_one_without_a_model(client, curator, tiny_taxonomy):
    Taxonomy.objects.create(slug="skills", name="Skills")
    client.force_login(curator)
    response = client.get("/models/", {"taxonomy": "skills"})
    assert response.status_code == 200
    page = response.content.decode()
    assert response.context["live"] is None
    assert "No live model yet" in page
    assert 'data-testid="taxonomy-switcher"' in page
    assert client.get("/models/", {"taxonomy": "nope"}).status_code == 404


def test_without_any_taxonomy_the_page_says_so(client, curator):
    client.force_login(curator)
    response = client.get("/models/")
    assert response.status_code == 200
    assert "No taxonomy yet" in response.content.decode()


def test_unknown_runs_and_versions_are_404s(client, admin_user, tiny_taxonomy):
    client.force_login(admin_user)
    assert client.get("/models/runs/999999/").status_code == 404
    assert client.post("/models/runs/999999/retry").status_code == 404
    assert client.post("/models/runs/999999/promote").status_code == 404
    assert client.post("/models/versions/999999/rollback").status_code == 404
    assert client.post("/models/nope/finetune").status_code == 404


# --- fine-tune now ----------------------------------------------------------------------------


def test_an_admin_queues_a_fine_tune_of_the_live_version(client, admin_user, first_version):
    client.force_login(admin_user)
    response = client.post("/models/jobs/finetune")
    run = TrainingRun.objects.get(kind=TrainingRun.Kind.FINETUNE)
    assert response.status_code == 302
    assert response["Location"] == f"/models/runs/{run.id}/"
    assert (run.status, run.trigger, run.requested_by, run.parent_version) == (
        "queued",
        "manual",
        admin_user,
        first_version,
    )
    page = client.get(response["Location"]).content.decode()
    assert f"Fine-tune of jobs queued as run #{run.id}." in page


def test_fine_tune_now_while_a_run_is_active_is_a_409_with_the_reason(
    client, admin_user, tiny_taxonomy
):
    active = make_run(
        tiny_taxonomy, kind=TrainingRun.Kind.REINDEX, status=TrainingRun.Status.RUNNING
    )
    client.force_login(admin_user)
    before = snapshot()
    response = client.post("/models/jobs/finetune")
    assert response.status_code == 409
    assert (
        f"jobs already has an active run (#{active.id}, reindex, running); wait for it to finish"
        in response.content.decode()
    )
    assert snapshot() == before


def test_fine_tune_now_without_a_live_model_is_a_409_with_the_reason(client, admin_user, db):
    Taxonomy.objects.create(slug="skills", name="Skills")
    client.force_login(admin_user)
    response = client.post("/models/skills/finetune")
    assert response.status_code == 409
    assert "taxonomy &#x27;skills&#x27; has no live model yet" in response.content.decode()
    assert not TrainingRun.objects.exists()


# --- rollback ---------------------------------------------------------------------------------


def test_a_rollback_asks_to_confirm_first(client, admin_user, older_version):
    client.force_login(admin_user)
    before = snapshot()
    response = client.get(f"/models/versions/{older_version.id}/rollback")
    assert response.status_code == 200
    page = response.content.decode()
    assert "Roll jobs back to jobs/v2?" in page
    assert "in place of jobs/v1" in page
    assert f'action="/models/versions/{older_version.id}/rollback"' in page
    assert snapshot() == before


def test_an_admin_rolls_back_to_an_earlier_version(client, admin_user, older_version):
    client.force_login(admin_user)
    response = client.post(f"/models/versions/{older_version.id}/rollback")
    run = TrainingRun.objects.get(kind=TrainingRun.Kind.ROLLBACK)
    assert response.status_code == 302
    assert response["Location"] == f"/models/runs/{run.id}/"
    assert (run.status, run.model_version, run.requested_by) == (
        "queued",
        older_version,
        admin_user,
    )
    event = AuditEvent.objects.get(action="model_version.rollback")
    assert (event.actor, event.object_id) == (admin_user, str(older_version.id))
    page = client.get(response["Location"]).content.decode()
    assert "Rolls back to" in page and "jobs/v2" in page


def test_rolling_back_to_the_live_version_is_a_409_with_the_reason(
    client, admin_user, first_version
):
    client.force_login(admin_user)
    before = snapshot()
    response = client.post(f"/models/versions/{first_version.id}/rollback")
    assert response.status_code == 409
    assert "jobs/v1 is already live" in response.content.decode()
    assert snapshot() == before


def test_a_rollback_while_a_run_is_active_is_a_409(client, admin_user, older_version):
    make_run(older_version.taxonomy)
    client.force_login(admin_user)
    before = snapshot()
    response = client.post(f"/models/versions/{older_version.id}/rollback")
    assert response.status_code == 409
    assert "jobs already has an active run" in response.content.decode()
    assert snapshot() == before


# --- one run: progress, reports and actions ---------------------------------------------------


def test_a_run_page_shows_status_stage_progress_and_eta(client, curator, tiny_taxonomy):
    run = make_run(tiny_taxonomy, stage="train", progress=0.42, eta_seconds=185)
    client.force_login(curator)
    response = client.get(f"/models/runs/{run.id}/")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'data-testid="run-status">Running<' in page
    assert 'data-testid="run-stage">train<' in page
    assert '<progress max="100" value="42"' in page
    assert "about 3 min" in page


def test_a_failed_run_shows_its_error_and_a_retry_button_for_admins_only(
    client, curator, admin_user, failed_run
):
    client.force_login(curator)
    page = client.get(f"/models/runs/{failed_run.id}/").content.decode()
    assert "MemoryError: the index did not fit" in page
    assert 'data-testid="retry"' not in page
    client.force_login(admin_user)
    page = client.get(f"/models/runs/{failed_run.id}/").content.decode()
    assert 'data-testid="retry">Retry</button>' in page
    assert "Promote anyway" not in page


def test_an_admin_retries_a_failed_run(client, admin_user, failed_run):
    client.force_login(admin_user)
    response = client.post(f"/models/runs/{failed_run.id}/retry")
    retry = TrainingRun.objects.get(retry_of=failed_run)
    assert response.status_code == 302
    assert response["Location"] == f"/models/runs/{retry.id}/"
    assert (retry.kind, retry.status, retry.requested_by) == ("reindex", "queued", admin_user)
    page = client.get(response["Location"]).content.decode()
    assert f"Run #{failed_run.id} queued again as run #{retry.id}." in page
    assert f'href="/models/runs/{failed_run.id}/">run #{failed_run.id}</a>' in page


def test_retrying_a_run_that_did_not_fail_is_a_409_with_the_reason(
    client, admin_user, tiny_taxonomy
):
    done = TrainingRun.objects.get(taxonomy=tiny_taxonomy)  # the build that made jobs/v1
    client.force_login(admin_user)
    before = snapshot()
    response = client.post(f"/models/runs/{done.id}/retry")
    assert response.status_code == 409
    assert f"run {done.id} is succeeded; only a failed run can be retried" in (
        response.content.decode()
    )
    assert snapshot() == before


def test_retrying_while_another_run_is_active_is_a_409(client, admin_user, failed_run):
    make_run(failed_run.taxonomy, status=TrainingRun.Status.QUEUED)
    client.force_login(admin_user)
    before = snapshot()
    response = client.post(f"/models/runs/{failed_run.id}/retry")
    assert response.status_code == 409
    assert "jobs already has an active run" in response.content.decode()
    assert snapshot() == before


HELD_OUT_CELLS = [
    *["Held-out", "feedback", "(4)", "feedback", "0.500", "0.750", "+0.250"],
    *["[+0.230,", "+0.270]", "0", "/", "1", "1.0000", "✓"],
]


def test_the_gate_report_is_a_table_with_the_decision_reasons_and_verdict_share(
    client, curator, rejected_finetune
):
    client.force_login(curator)
    page = client.get(f"/models/runs/{rejected_finetune.id}/").content.decode()
    assert 'data-testid="gate-decision">reject<' in page
    assert "typos fell by 0.050 (60 lost, 10 gained of 1000; p = 0.0000, below 0.0125)" in page
    rows = re.findall(
        r'<tr data-testid="gate-row" class="(md-pass|md-fail)">(.*?)</tr>', page, re.S
    )
    cells = [(verdict, re.sub(r"<[^>]+>", " ", row).split()) for verdict, row in rows]
    assert cells == [
        ("md-fail", ["Typos", "(1000)", "frozen", "0.900", "0.850", "-0.050",
                     "[-0.070,", "-0.030]", "60", "/", "10", "0.0000", "✗"]),
        ("md-pass", ["Composition", "(1000)", "frozen", "0.800", "0.820", "+0.020",
                     "[+0.000,", "+0.040]", "5", "/", "25", "0.9999", "✓"]),
        # Against the reference, the version the chain of gate promotions started from.
        ("md-fail", ["Extra", "words", "(1000)", "frozen,", "against", "jobs/v1", "0.930",
                     "0.915", "-0.015", "[-0.035,", "+0.005]", "25", "/", "10", "0.0083", "✗"]),
        ("md-pass", HELD_OUT_CELLS),
    ]  # fmt: skip
    assert "extra_words fell by 0.015 since jobs/v1 (25 lost, 10 gained of 1000" in page
    footnote = " ".join(re.search(r"Each row compares(.*?)</p>", page, re.S).group(1).split())
    assert "McNemar's exact one-sided p below 0.0125 (the gate's level 0.05" in footnote
    assert "the frozen-suite rows against jobs/v1, where the chain of promotions" in footnote
    stages = re.search(r'data-testid="stage-seconds">(.*?)</p>', page, re.S).group(1)
    assert " ".join(stages.split()) == (
        "Seconds per stage: learn 135.2 · held_out 14.0 · catch_up 45.1 · index 6.3."
    )
    share = re.search(r'data-testid="verdict-share">(.*?)</p>', page, re.S).group(1)
    assert "(12)" in share and "live 0.500 → candidate 0.750" in share
    # Curators see the report, not the override.
    assert "Promote anyway" not in page


def test_the_flip_report_puts_confirmed_rows_the_new_model_gets_wrong_first_and_marks_them(
    client, curator, tiny_taxonomy
):
    run = make_run(
        tiny_taxonomy,
        status=TrainingRun.Status.PROMOTED,
        stage="done",
        progress=1.0,
        gate_report={**GATE_REPORT, "decision": "promote", "reasons": []},
        flip_report=FLIP_REPORT,
    )
    client.force_login(curator)
    page = client.get(f"/models/runs/{run.id}/").content.decode()
    counts = re.sub(
        r"\s+", " ", re.search(r'data-testid="flip-counts">(.*?)</p>', page, re.S).group(1)
    )
    assert "40 inputs compared: 205 broken, 1 fixed, 1 changed." in counts
    assert "2 confirmed by a curator and now wrong." in counts
    broken = re.search(r'data-testid="flip-broken">(.*?)</table>', page, re.S).group(1)
    rows = re.findall(r"<tr data-testid=\"flip-row\"([^>]*)>\s*<td>([^<]+)", broken)
    assert [(text, 'data-confirmed="true"' in attrs) for attrs, text in rows] == [
        ("icu nurse", True),
        ("senior java dev", True),
        ("barista trainee", False),
    ]
    assert broken.count("a curator confirmed this; the new model gets it wrong") == 2
    assert "… and 202 more not listed." in page
    fixed = re.search(r'data-testid="flip-fixed">(.*?)</table>', page, re.S).group(1)
    assert "java coder" in fixed and "a curator confirmed this" not in fixed
    assert "chef de partie" in re.search(
        r'data-testid="flip-changed">(.*?)</table>', page, re.S
    ).group(1)


def test_an_admin_is_offered_promote_anyway_on_a_rejected_fine_tune_only(
    client, admin_user, rejected_finetune, failed_run
):
    client.force_login(admin_user)
    page = client.get(f"/models/runs/{rejected_finetune.id}/").content.decode()
    assert f'href="/models/runs/{rejected_finetune.id}/promote" data-testid="promote"' in page
    confirm = client.get(f"/models/runs/{rejected_finetune.id}/promote")
    assert confirm.status_code == 200
    assert "Promote jobs/v2 although the gate rejected it?" in confirm.content.decode()
    assert "Promote anyway" not in client.get(f"/models/runs/{failed_run.id}/").content.decode()


def test_an_admin_promotes_a_rejected_candidate_anyway(client, admin_user, rejected_finetune):
    client.force_login(admin_user)
    candidate = rejected_finetune.model_version
    response = client.post(f"/models/runs/{rejected_finetune.id}/promote")
    assert response.status_code == 302
    assert response["Location"] == f"/models/runs/{rejected_finetune.id}/"
    rejected_finetune.refresh_from_db()
    assert rejected_finetune.status == TrainingRun.Status.PROMOTED
    assert rejected_finetune.gate_report["forced_by"] == "ada"
    assert live_version_id(rejected_finetune.taxonomy) == candidate.id
    assert AuditEvent.objects.filter(action="training_run.promote", actor=admin_user).count() == 1
    page = client.get(response["Location"]).content.decode()
    assert "jobs/v2 is live: promoted over the gate&#x27;s rejection." in page
    assert 'data-testid="forced-by">promoted anyway by ada<' in page
    # The flip report is a worker's job; the page says so until it is there.
    assert 'data-testid="flip-pending"' in page
    promotion_finish(run_id=rejected_finetune.id)
    page = client.get(response["Location"]).content.decode()
    assert 'data-testid="flip-pending"' not in page
    assert 'data-testid="flip-counts">0 inputs compared' in page


def test_promoting_a_run_the_gate_did_not_reject_is_a_409_with_the_reason(
    client, admin_user, tiny_taxonomy
):
    done = TrainingRun.objects.get(taxonomy=tiny_taxonomy)
    client.force_login(admin_user)
    before = snapshot()
    response = client.post(f"/models/runs/{done.id}/promote")
    assert response.status_code == 409
    assert f"run {done.id} is a build run that is succeeded; only a rejected fine-tune" in (
        response.content.decode()
    )
    assert snapshot() == before


# --- polling while a run is active ------------------------------------------------------------


def test_the_runs_region_polls_while_a_run_is_active(client, curator, tiny_taxonomy):
    make_run(tiny_taxonomy, stage="train", progress=0.25, eta_seconds=40)
    client.force_login(curator)
    page = client.get("/models/").content.decode()
    region = re.search(r'<section id="runs"[^>]*>', page).group(0)
    assert POLLING in region
    assert 'hx-get="/models/?taxonomy=jobs"' in region
    partial = client.get("/models/", {"taxonomy": "jobs"}, **HTMX)
    assert partial.status_code == 200
    body = partial.content.decode()
    assert '<section id="runs"' in body
    assert POLLING in body and "<html" not in body
    assert "25%" in body and "40 s" in body
    assert "HX-Refresh" not in partial


def test_the_runs_region_stops_polling_and_reloads_the_page_once_no_run_is_active(
    client, curator, tiny_taxonomy
):
    client.force_login(curator)
    page = client.get("/models/").content.decode()
    assert POLLING not in page
    partial = client.get("/models/", {"taxonomy": "jobs"}, **HTMX)
    assert partial.status_code == 200
    assert POLLING not in partial.content.decode()
    assert partial["HX-Refresh"] == "true"


def test_a_run_page_polls_only_while_the_run_is_active(client, curator, tiny_taxonomy):
    run = make_run(tiny_taxonomy, stage="train", progress=0.5)
    client.force_login(curator)
    assert POLLING in client.get(f"/models/runs/{run.id}/").content.decode()
    partial = client.get(f"/models/runs/{run.id}/", **HTMX).content.decode()
    assert '<div id="run-panel"' in partial
    assert POLLING in partial and "<html" not in partial
    TrainingRun.objects.filter(id=run.id).update(status=TrainingRun.Status.FAILED, error="boom")
    partial = client.get(f"/models/runs/{run.id}/", **HTMX).content.decode()
    assert POLLING not in partial and "boom" in partial


def test_the_page_costs_the_same_queries_however_many_runs_and_versions_exist(
    client, curator, tiny_taxonomy, django_assert_max_num_queries
):
    client.force_login(curator)
    with django_assert_max_num_queries(12) as few:
        client.get("/models/")
    for number in range(2, 30):
        ModelVersion.objects.create(
            taxonomy=tiny_taxonomy,
            number=number,
            encoder_kind="char_ngram_tfidf",
            artifact_path="x",
            parent=ModelVersion.objects.get(taxonomy=tiny_taxonomy, number=number - 1),
        )
        make_run(tiny_taxonomy, status=TrainingRun.Status.REJECTED, requested_by=curator)
    with django_assert_max_num_queries(len(few.captured_queries)):
        response = client.get("/models/")
    assert len(response.context["runs"]) == 20
