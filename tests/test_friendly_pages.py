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
