"""The small things: a 403 page in the site's frame, the upload form's taxonomy preselected
when there is only one (and left to choose when there are several)."""

from __future__ import annotations

from annotations.services.taxonomy import taxonomy_import
from tests.conftest import TINY_CSV


def test_a_curator_on_an_admin_page_gets_the_sites_403_page(client, curator, tiny_taxonomy):
    client.force_login(curator)
    response = client.get("/taxonomies/")
    assert response.status_code == 403
    page = response.content.decode()
    assert 'class="topbar"' in page and 'data-testid="forbidden"' in page
    assert "Only admins can use this page" in page
    assert 'href="/" data-testid="forbidden-home"' in page


def test_the_upload_form_preselects_the_only_taxonomy(client, curator, tiny_taxonomy):
    client.force_login(curator)
    page = client.get("/inputs/upload/").content.decode()
    assert '<option value="jobs" selected>' in page
    assert "---------" not in page


def test_with_two_taxonomies_the_upload_form_asks_which(client, curator, tiny_taxonomy):
    taxonomy_import(slug="other", path=TINY_CSV, fmt="csv", name="Other")
    client.force_login(curator)
    page = client.get("/inputs/upload/").content.decode()
    assert '<option value="" selected>---------</option>' in page
    assert (
        '<option value="other" selected>'
        in client.get("/inputs/upload/", {"taxonomy": "other"}).content.decode()
    )


def test_an_unknown_address_gets_the_sites_404_page(client, curator, tiny_taxonomy):
    client.force_login(curator)
    response = client.get("/review/nothing-here/")
    assert response.status_code == 404
    page = response.content.decode()
    assert 'class="topbar"' in page and 'data-testid="not-found"' in page
    assert "Nothing lives at <code>/review/nothing-here/</code>" in page


def test_an_unknown_api_address_stays_a_json_404(api_client):
    response = api_client.get("/api/v1/nothing-here")
    assert response.status_code == 404
    assert response.json() == {"detail": "no endpoint /api/v1/nothing-here"}


def test_a_wrong_method_gets_a_page_naming_the_right_one(client, admin_user, tiny_taxonomy):
    client.force_login(admin_user)
    response = client.get("/models/jobs/finetune")
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    page = response.content.decode()
    assert 'class="topbar"' in page and 'data-testid="method-not-allowed"' in page
    assert "GET is not how <code>/models/jobs/finetune</code> is used: it takes POST." in page


def test_the_api_keeps_its_json_405(api_client, tiny_taxonomy):
    response = api_client.delete("/api/v1/taxonomies/jobs")
    assert response.status_code == 405
    assert response.json() == {"detail": 'Method "DELETE" not allowed.'}


def test_answers_for_a_signed_in_user_are_private_to_caches(client, api_client, curator):
    client.force_login(curator)
    assert "private" in client.get("/review/")["Cache-Control"]
    assert "private" in api_client.get("/api/v1/taxonomies")["Cache-Control"]
    # What anyone gets the same is not marked.
    client.logout()
    assert "private" not in client.get("/healthz").get("Cache-Control", "")


def test_a_body_declared_too_long_is_refused_before_anything_reads_it(
    client, api_client, curator, tiny_taxonomy, settings, caplog
):
    """An upload declaring 2 GiB once had 42 MB written to /tmp before any answer; anonymous
    clients could do it to the login page with a CSRF cookie from a GET."""
    huge = str(2 * 1024**3)
    login = client.post("/accounts/login/", {"username": "x"}, CONTENT_LENGTH=huge)
    assert login.status_code == 413
    assert 'data-testid="too-large"' in login.content.decode()
    page = login.content.decode().replace("\xa0", " ")
    assert "the request is 2.0 GB; this address takes up to 2.5 MB" in page
    api = api_client.post(
        "/api/v1/bulk-jobs", {"taxonomy": "jobs"}, format="multipart", CONTENT_LENGTH=huge
    )
    assert api.status_code == 413
    assert api.json()["detail"].endswith("(SIAMWEB_BULK_MAX_BYTES)")
    assert any(
        r.levelname == "WARNING" and "2147483648 bytes declared" in r.getMessage()
        for r in caplog.records
    )
    # Each address has its own limit: 3 MB is too much for the login page, not for a bulk job.
    three_mb = str(3 * 1024**2)
    assert client.post("/accounts/login/", {}, CONTENT_LENGTH=three_mb).status_code == 413
    assert api_client.get("/api/v1/bulk-jobs", CONTENT_LENGTH=three_mb).status_code != 413
