"""A taxonomy's guidelines: admins write them in Markdown on the taxonomy's page, curators read
them on every card of that taxonomy, rendered without raw HTML; a refusal loses nothing."""

from __future__ import annotations

import pytest

from annotations.models import AuditEvent, Taxonomy
from annotations.services.review.inputs import inputs_submit
from annotations.services.taxonomy_edit.checks import TaxonomyEditError
from annotations.services.taxonomy_edit.guidelines import (
    GUIDELINES_MAX_CHARS,
    taxonomy_guidelines_update,
)

URL = "/taxonomies/jobs/guidelines"
GUIDELINES = (
    "## Drivers\n\n"
    "Pick **Heavy Truck Drivers** only for a CDL.\n\n"
    "<script>alert('x')</script> [a trap](javascript:alert(1)) [O*NET](https://www.onetonline.org/)"
)


def test_an_admin_writes_guidelines_and_curators_read_them_rendered_on_the_card(
    client, admin_user, curator, tiny_taxonomy
):
    client.force_login(admin_user)
    response = client.post(URL, {"guidelines": GUIDELINES})
    assert response.status_code == 302
    assert Taxonomy.objects.get(slug="jobs").guidelines == GUIDELINES
    event = AuditEvent.objects.get(action="taxonomy.guidelines")
    assert (event.actor, event.before, event.after) == (
        admin_user,
        {"guidelines": ""},
        {"guidelines": GUIDELINES},
    )
    detail = client.get("/taxonomies/jobs/").content.decode()
    assert "Guidelines saved." in detail
    assert "<h2>Drivers</h2>" in detail

    inputs_submit(taxonomy=tiny_taxonomy, texts=["Lorry Driver"], source="api")
    client.force_login(curator)
    card = client.get("/review/").content.decode()
    shown = card.split('data-testid="guidelines"')[1].split("</details>")[0]
    assert "<h2>Drivers</h2>" in shown
    assert "<strong>Heavy Truck Drivers</strong>" in shown
    assert '<a href="https://www.onetonline.org/">O*NET</a>' in shown
    # HTML an admin typed is text, and a javascript: link is not a link.
    assert "&lt;script&gt;alert('x')&lt;/script&gt;" in shown
    assert "<script>" not in shown
    assert 'href="javascript' not in shown


def test_a_card_without_guidelines_shows_none(client, curator, tiny_taxonomy):
    inputs_submit(taxonomy=tiny_taxonomy, texts=["Lorry Driver"], source="api")
    client.force_login(curator)
    assert 'data-testid="guidelines"' not in client.get("/review/").content.decode()


def test_guidelines_over_the_limit_are_refused_and_what_was_typed_is_kept(
    client, admin_user, tiny_taxonomy
):
    taxonomy_guidelines_update(taxonomy=tiny_taxonomy, text="Be careful.", user=admin_user)
    client.force_login(admin_user)
    typed = "x" * (GUIDELINES_MAX_CHARS + 1)
    response = client.post(URL, {"guidelines": typed})
    assert response.status_code == 400
    page = response.content.decode()
    assert (
        f"the guidelines text is longer than {GUIDELINES_MAX_CHARS:,} characters "
        f"({GUIDELINES_MAX_CHARS + 1:,}); nothing was saved" in page
    )
    assert typed in page  # back in the form, not lost
    assert Taxonomy.objects.get(slug="jobs").guidelines == "Be careful."


def test_curators_cannot_write_guidelines(client, curator, tiny_taxonomy):
    client.force_login(curator)
    assert client.post(URL, {"guidelines": "mine"}).status_code == 403
    assert Taxonomy.objects.get(slug="jobs").guidelines == ""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "the guidelines text must be a string"),
        ("a\x00b", "the guidelines text contains control characters"),
        # One text rule for every field: a direction override is refused here too.
        ("Pick \u202egnp.exe", "the guidelines text contains bidirectional controls"),
    ],
)
def test_the_service_refuses_what_is_not_text(tiny_taxonomy, admin_user, text, message):
    with pytest.raises(TaxonomyEditError, match=message):
        taxonomy_guidelines_update(taxonomy=tiny_taxonomy, text=text, user=admin_user)
    assert not AuditEvent.objects.filter(action="taxonomy.guidelines").exists()


def test_saving_the_same_guidelines_again_records_nothing(tiny_taxonomy, admin_user):
    taxonomy_guidelines_update(taxonomy=tiny_taxonomy, text="Same.\r\n", user=admin_user)
    taxonomy_guidelines_update(taxonomy=tiny_taxonomy, text="Same.", user=admin_user)
    assert AuditEvent.objects.filter(action="taxonomy.guidelines").count() == 1


def test_the_api_gives_the_guidelines_as_written(api_client, admin_user, tiny_taxonomy):
    taxonomy_guidelines_update(taxonomy=tiny_taxonomy, text="**Bold** <b>", user=admin_user)
    body = api_client.get("/api/v1/taxonomies/jobs").json()
    assert body["guidelines"] == "**Bold** <b>"
