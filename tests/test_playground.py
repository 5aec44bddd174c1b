from __future__ import annotations

import re

import pytest
from django.conf import settings

from annotations.models import AuditEvent, Group, Input, Prediction, ReviewItem
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.verdicts import judgement_create
from annotations.services.taxonomy import taxonomy_import
from tests.conftest import TINY_CSV

HTMX = {"HTTP_HX_REQUEST": "true"}


def results(client, text: str, taxonomy: str = "jobs", **params):
    return client.get("/playground/results", {"taxonomy": taxonomy, "text": text, **params}, **HTMX)


def ranked(response) -> list[tuple[str, str]]:
    """(group code, source) of each ranked group, best first."""
    return re.findall(
        r'data-testid="ranked-group" data-group-code="([^"]+)" data-source="(\w+)"',
        response.content.decode(),
    )


def test_the_playground_requires_login(client, tiny_taxonomy):
    response = client.get("/playground/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/playground/"
    assert results(client, "Barista").status_code == 302


def test_a_user_without_a_role_is_refused(client, tiny_taxonomy, user_model):
    outsider = user_model.objects.create_user(username="olga", password="olga-pass-123")
    client.force_login(outsider)
    assert client.get("/playground/").status_code == 403
    assert results(client, "Barista").status_code == 403
    response = client.post("/playground/send", {"taxonomy": "jobs", "text": "Barista"})
    assert response.status_code == 403
    assert not Input.objects.exists()


def test_the_page_offers_the_taxonomies_a_k_selector_and_a_live_text_field(
    client, curator, tiny_taxonomy
):
    client.force_login(curator)
    response = client.get("/playground/")
    assert response.status_code == 200
    page = response.content.decode()
    assert '<option value="jobs">Tiny jobs</option>' in page
    assert [int(k) for k in re.findall(r'<option value="(\d+)"', page)] == list(range(1, 11))
    assert 'hx-get="/playground/results"' in page
    assert 'hx-trigger="input changed delay:200ms, search"' in page


def test_results_show_ranked_groups_with_scores_matched_members_and_the_model_version(
    client, curator, tiny_taxonomy
):
    client.force_login(curator)
    response = results(client, "senior java developer", k=3)
    assert response.status_code == 200
    page = response.content.decode()
    assert "<html" not in page  # just the partial
    rows = ranked(response)
    assert len(rows) == 3
    assert rows[0] == ("15-1252", "model")
    assert "Software Developers" in page
    assert re.search(r"matched “(Java Software Engineer|Python Developer|Backend Developer)", page)
    version = tiny_taxonomy.model_versions.get()
    assert f'<span data-testid="model-version">{version.label}</span>' in page


def test_results_store_nothing(client, curator, tiny_taxonomy):
    client.force_login(curator)
    assert results(client, "Coffee Maker").status_code == 200
    assert client.get("/playground/", {"taxonomy": "jobs", "text": "Nurse"}).status_code == 200
    assert not Input.objects.exists()
    assert not Prediction.objects.exists()
    assert not ReviewItem.objects.exists()


def test_a_curators_verdict_on_the_text_shows_as_the_curator_source(client, curator, tiny_taxonomy):
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Java Barista"], source="api")
    baristas = Group.objects.get(taxonomy=tiny_taxonomy, code="35-3023")
    judgement_create(review_item=item, user=curator, verdict="reassign", group=baristas)
    client.force_login(curator)
    response = results(client, "java   barista")
    assert response.status_code == 200
    rows = ranked(response)
    assert rows[0] == ("35-3023", "curator")
    assert {source for _, source in rows[1:]} == {"model"}


def test_k_chooses_how_many_groups_are_shown_from_1_to_10(client, curator, tiny_taxonomy):
    client.force_login(curator)
    assert len(ranked(results(client, "nurse", k=1))) == 1
    assert len(ranked(results(client, "nurse", k=5))) == 5
    for bad in ("0", "11", "many"):
        response = results(client, "nurse", k=bad)
        assert response.status_code == 400
        assert "Groups shown: choose a whole number from 1 to 10" in response.content.decode()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x" * 201, "text: is longer than 200 characters (201)"),
        ("Java\x00Dev", "text: contains control characters"),
        # A page decodes bytes that are not UTF-8 as U+FFFD: refused, as the API refuses them.
        ("Caf\ufffd Manager", "text: contains U+FFFD"),
        ("\u2066Nurse\u2069", "text: contains bidirectional controls"),
    ],
)
def test_bad_text_gets_a_clear_message_and_a_400(client, curator, tiny_taxonomy, text, message):
    client.force_login(curator)
    response = results(client, text)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert 'role="alert"' in response.content.decode()


@pytest.mark.parametrize("text", ["", "   "])
def test_a_cleared_box_gets_a_prompt_not_an_error(client, curator, tiny_taxonomy, text):
    client.force_login(curator)
    response = results(client, text)
    assert response.status_code == 200
    page = response.content.decode()
    assert 'data-testid="playground-prompt"' in page
    assert "is empty" not in page and 'role="alert"' not in page


def test_an_unknown_taxonomy_gets_a_400_naming_it(client, curator, tiny_taxonomy):
    client.force_login(curator)
    response = results(client, "Barista", taxonomy="nope")
    assert response.status_code == 400
    assert "taxonomy: no taxonomy &#x27;nope&#x27;" in response.content.decode()


@pytest.fixture
def taxonomy_without_model(db):
    return taxonomy_import(slug="bare", path=TINY_CSV, fmt="csv", name="No model yet").taxonomy


def test_a_taxonomy_without_a_live_model_gets_a_409(client, curator, taxonomy_without_model):
    client.force_login(curator)
    response = results(client, "Barista", taxonomy="bare")
    assert response.status_code == 409
    assert "taxonomy: taxonomy &#x27;bare&#x27; has no live model yet" in response.content.decode()


def test_without_a_live_model_the_page_names_the_run_making_one_or_the_command(
    client, curator, taxonomy_without_model
):
    from models_app.models import TrainingRun

    TrainingRun.objects.filter(taxonomy=taxonomy_without_model).delete()
    client.force_login(curator)
    page = results(client, "Barista", taxonomy="bare").content.decode()
    assert "has no live model yet; run `python manage.py train bare --activate`" in page
    run = TrainingRun.objects.create(taxonomy=taxonomy_without_model, kind="build")
    page = results(client, "Barista", taxonomy="bare").content.decode()
    assert (
        f"has no live model yet; run #{run.id} (build, queued) is making one; try again when "
        "it ends"
    ) in page


def test_the_page_shows_results_without_javascript_too(client, curator, tiny_taxonomy):
    client.force_login(curator)
    response = client.get("/playground/", {"taxonomy": "jobs", "text": "Long haul trucker"})
    assert response.status_code == 200
    assert "<html" in response.content.decode()
    assert ranked(response)[0] == ("53-3032", "model")


# --- send to review -------------------------------------------------------------------------


def test_send_to_review_stores_one_input_and_one_review_item(client, curator, tiny_taxonomy):
    client.force_login(curator)
    response = client.post(
        "/playground/send", {"taxonomy": "jobs", "text": "  Night  shift nurse "}, **HTMX
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "Stored “Night shift nurse” as a new input and queued it for review." in page
    assert 'href="/review/?taxonomy=jobs"' in page
    stored = Input.objects.get()
    assert (stored.text, stored.source) == ("Night shift nurse", "playground")
    assert stored.occurrences == 1
    item = ReviewItem.objects.get()
    assert (item.input, item.status) == (stored, "pending")
    event = AuditEvent.objects.get(action="input.submit")
    assert (event.actor, event.object_id) == (curator, str(stored.id))


def test_sending_a_known_text_again_counts_one_more_occurrence(client, curator, tiny_taxonomy):
    inputs_submit(taxonomy=tiny_taxonomy, texts=["Barista"], source="api")
    client.force_login(curator)
    response = client.post("/playground/send", {"taxonomy": "jobs", "text": "barista"}, **HTMX)
    assert response.status_code == 200
    assert "now seen 2 times" in response.content.decode()
    assert Input.objects.get().occurrences == 2
    assert ReviewItem.objects.count() == 1


def test_send_to_review_refuses_bad_text_and_stores_nothing(client, curator, tiny_taxonomy):
    client.force_login(curator)
    response = client.post("/playground/send", {"taxonomy": "jobs", "text": "a\x1bb"}, **HTMX)
    assert response.status_code == 400
    assert "text: contains control characters" in response.content.decode()
    assert not Input.objects.exists()


def test_send_to_review_without_a_live_model_gets_a_409_and_stores_nothing(
    client, curator, taxonomy_without_model
):
    client.force_login(curator)
    response = client.post("/playground/send", {"taxonomy": "bare", "text": "Barista"}, **HTMX)
    assert response.status_code == 409
    assert "nothing was stored" in response.content.decode()
    assert not Input.objects.exists()


def test_send_to_review_only_accepts_post(client, curator, tiny_taxonomy):
    client.force_login(curator)
    response = client.get("/playground/send", {"taxonomy": "jobs", "text": "Barista"})
    assert response.status_code == 405
    assert not Input.objects.exists()


def test_a_plain_form_post_shows_the_confirmation_on_the_full_page(client, curator, tiny_taxonomy):
    client.force_login(curator)
    response = client.post("/playground/send", {"taxonomy": "jobs", "text": "Barista"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "<html" in page
    assert "as a new input and queued it for review" in page
    assert Input.objects.count() == 1


def test_the_site_has_an_icon_and_favicon_ico_finds_it(client, curator):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("favicon.svg")
    client.force_login(curator)
    page = client.get("/playground/").content.decode()
    assert 'rel="icon"' in page and "favicon.svg" in page


def test_a_link_with_only_a_text_answers_with_what_the_page_shows_chosen(
    client, curator, tiny_taxonomy
):
    # The taxonomy list preselects the first taxonomy and the k list shows the default: a link
    # that names only the text is answered with those, not "choose a taxonomy" beneath them.
    client.force_login(curator)
    response = client.get("/playground/", {"text": "senior java developer"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "choose a taxonomy" not in page
    assert '<option value="jobs" selected>Tiny jobs</option>' in page
    default_k = min(settings.SIAMWEB_DEFAULT_K, 10)
    assert f'<option value="{default_k}" selected>{default_k}</option>' in page
    rows = ranked(response)
    assert rows[0] == ("15-1252", "model")
    assert len(rows) == min(default_k, tiny_taxonomy.groups.count())
    # The same from the results endpoint, and a taxonomy that does not exist is still refused.
    partial = client.get("/playground/results", {"text": "senior java developer"}, **HTMX)
    assert ranked(partial) == rows
    refused = client.get("/playground/", {"text": "Nurse", "taxonomy": "nope"})
    assert refused.status_code == 400
    assert "no taxonomy &#x27;nope&#x27;" in refused.content.decode()
