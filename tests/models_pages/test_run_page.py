"""One run's page: its status, stage, progress and error, and its gate and flip reports."""

from __future__ import annotations

import re

from models_app.models import TrainingRun
from tests.models_pages.conftest import FLIP_REPORT, GATE_REPORT, make_run


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
    assert 'data-testid="run-stage-meaning">(training the encoder)<' in page


def test_a_fine_tunes_second_training_says_what_it_is(client, curator, tiny_taxonomy):
    run = make_run(tiny_taxonomy, stage="catch up", progress=0.81, eta_seconds=20)
    client.force_login(curator)
    page = client.get(f"/models/runs/{run.id}/").content.decode()
    assert 'data-testid="run-stage">catch up<' in page
    assert "training again on every verdict, the held-out ones the gate" in page
    # Its band is after training's: the bar moves while it runs.
    assert '<progress max="100" value="81"' in page


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


HELD_OUT_CELLS = [
    *["New", "verdicts", "held", "out", "(4)", "feedback", "0.500", "0.750", "+0.250"],
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
    # The figures; the last cell, what the row means for a curator, is tested on its own.
    cells = [
        (verdict, re.sub(r"<[^>]+>", " ", row.rsplit("<td", 1)[0]).split()) for verdict, row in rows
    ]
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


def test_the_gate_report_leads_with_a_sentence_a_row_in_plain_words(
    client, curator, rejected_finetune
):
    client.force_login(curator)
    page = client.get(f"/models/runs/{rejected_finetune.id}/").content.decode()
    listed = re.search(r'data-testid="gate-sentences">(.*?)</ul>', page, re.S).group(1)
    sentences = [" ".join(re.sub(r"<[^>]+>", "", li).split()) for li in listed.split("</li>")]
    assert [s for s in sentences if s] == [
        "Typos: 850 of 1,000 right against 900 of 1,000 before; a drop this size happens by "
        "chance less than 1 time in 1,000: blocking.",
        "Composition: 820 of 1,000 right against 800 of 1,000 before; no drop: not blocking.",
        "Extra words: 915 of 1,000 right against 930 of 1,000 with jobs/v1; a drop this size "
        "happens by chance 1 time in 120: blocking.",
        "New verdicts held out: 3 of 4 right against 2 of 4 before; no drop: not blocking.",
    ]
    assert page.index('data-testid="gate-sentences"') < page.index('data-testid="gate-metrics"')


def test_a_run_validated_once_says_its_figure_instead_of_drawing_a_dot(
    client, curator, rejected_finetune
):
    version = rejected_finetune.model_version
    version.metrics = {**version.metrics, "history": [{"step": 40, "validation_accuracy": 0.875}]}
    version.save()
    client.force_login(curator)
    page = client.get(f"/models/runs/{rejected_finetune.id}/").content.decode()
    assert 'data-testid="training-curve"' not in page
    assert "Validated once, at step 40: 0.875 of the held-out strings" in page
    # Two are a straight line, not a curve: the figures are said too.
    two = [{"step": 40, "validation_accuracy": 0.875}, {"step": 80, "validation_accuracy": 0.9}]
    version.metrics = {**version.metrics, "history": two}
    version.save()
    page = client.get(f"/models/runs/{rejected_finetune.id}/").content.decode()
    assert 'data-testid="training-curve"' not in page
    assert "Validated 2 times: at step 40 0.875, at step 80 0.900 of the held-out" in page


def test_the_header_gives_the_figure_the_versions_table_gives(client, curator, rejected_finetune):
    """A live version the gate measured (no evaluation of its own) shows the gate's figure in
    the header, as the table does, not "not evaluated"."""
    from models_app.models import Deployment

    version = rejected_finetune.model_version
    version.metrics = {"gate": rejected_finetune.gate_report}
    version.save()
    Deployment.objects.filter(taxonomy=version.taxonomy).update(
        index_build=rejected_finetune.index_build
    )
    client.force_login(curator)
    page = client.get("/models/", {"taxonomy": "jobs"}).content.decode()
    header = re.search(r'data-testid="live-primary">(.*?)</dd>', page, re.S).group(1)
    assert "not evaluated" not in header
    assert "(as its gate measured it)" in header


def test_the_gate_report_lists_the_confident_answers_a_candidate_would_move(
    client, curator, tiny_taxonomy
):
    moved = {
        "compared": 148, "changed_without_evidence": 9, "confident": 0.9, "moved": 1,
        "expected_lost": 0.94, "allowed": 0.148, "passed": False,
        "why": "1 answer the live ranker holds at p ≥ 0.90 moves to groups no curator has ...",
        "examples": [{
            "input": "Java Backend Engineer", "probability": 0.94,
            "before": {"code": "15-1252", "name": "Software Developers"},
            "after": {"code": "19-1012", "name": "Food Scientists and Technologists"},
        }],
    }  # fmt: skip
    run = make_run(
        tiny_taxonomy,
        status=TrainingRun.Status.REJECTED,
        gate_report={**GATE_REPORT, "answers_moved": moved},
    )
    client.force_login(curator)
    page = client.get(f"/models/runs/{run.id}/").content.decode()
    sentence = re.search(r'data-testid="answers-moved"[^>]*>(.*?)</p>', page, re.S).group(1)
    words = " ".join(re.sub(r"<[^>]+>", "", sentence).split())
    assert words == (
        "Real traffic: of 148 inputs compared, 1 answer the live ranker held at p ≥ 0.90 would "
        "move to a group no curator has put a text in: about 0.9 right answers lost, above the "
        "0.1 allowed."
    )
    # A gate that compared the served pairs says so.
    served = make_run(
        tiny_taxonomy,
        status=TrainingRun.Status.REJECTED,
        gate_report={**GATE_REPORT, "answers_moved": {**moved, "answered": "served"}},
    )
    page = client.get(f"/models/runs/{served.id}/").content.decode()
    sentence = re.search(r'data-testid="answers-moved"[^>]*>(.*?)</p>', page, re.S).group(1)
    assert "Both answered as users would see them" in " ".join(sentence.split())
    (row,) = re.findall(r'data-testid="answer-moved">(.*?)</tr>', page, re.S)
    cells = [" ".join(re.sub(r"<[^>]+>", "", c).split()) for c in row.split("</td>")][:4]
    assert cells == [
        "Java Backend Engineer", "0.94", "15-1252 Software Developers",
        "19-1012 Food Scientists and Technologists",
    ]  # fmt: skip


def test_each_gate_row_says_whether_a_curators_verdicts_can_move_it(
    client, curator, rejected_finetune
):
    client.force_login(curator)
    page = client.get(f"/models/runs/{rejected_finetune.id}/").content.decode()
    meanings = re.findall(r'data-testid="gate-meaning">(.*?)</td>', page, re.S)
    assert len(meanings) == 4
    by_row = dict(
        zip(["typos", "composition", "extra_words", "held_out_feedback"], meanings, strict=True)
    )
    # A generated suite is a cost no verdict wins back; held-out verdicts are the curators' own.
    assert "no verdict moves it" in by_row["typos"]
    assert "no verdict moves it" in by_row["extra_words"]
    assert "newest verdicts" in by_row["held_out_feedback"]
