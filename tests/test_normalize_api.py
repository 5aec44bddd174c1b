from __future__ import annotations

import io

import pytest
from rest_framework.test import APIClient

from annotations.models import Taxonomy
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.undo import judgement_undo
from annotations.services.review.verdicts import judgement_create
from models_app.bulk.jobs import bulk_job_create
from models_app.bulk.run import bulk_job_execute
from tests.test_bulk_jobs import result_rows

URL = "/api/v1/taxonomies/jobs/normalize"


def test_anonymous_requests_are_refused(tiny_taxonomy):
    response = APIClient().post(URL, {"texts": ["nurse"]}, format="json")
    assert response.status_code == 401
    assert "texts" not in response.json()


def test_a_bad_token_is_refused(tiny_taxonomy):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert client.post(URL, {"texts": ["nurse"]}, format="json").status_code == 401


def test_it_returns_ranked_groups_with_evidence_and_model_version(api_client, tiny_taxonomy):
    response = api_client.post(
        URL, {"texts": ["Senior Java Engineer", "icu nurse"], "k": 3}, format="json"
    )
    assert response.status_code == 200
    first, second = response.json()["results"]
    assert first["text"] == "Senior Java Engineer"
    assert first["model_version"] == "jobs/v1"
    assert first["source"] == "model"
    assert len(first["groups"]) == 3
    top = first["groups"][0]
    assert (top["code"], top["name"], top["member"]) == (
        "15-1252",
        "Software Developers",
        "Java Software Engineer",
    )
    assert 0 < top["score"] <= 1
    # Ranked by the evidence (the prior: the best member and the description); the clear
    # winner also has the most similar member.
    scores = [group["score"] for group in first["groups"]]
    assert top["score"] == max(scores) and all(0 <= s <= 1 for s in scores)
    assert second["groups"][0]["code"] == "29-1141"
    assert second["groups"][0]["member"] == "ICU Nurse"


def test_session_authentication_works_too(client, curator, tiny_taxonomy):
    client.force_login(curator)
    response = client.post(URL, {"texts": ["truck driver"]}, content_type="application/json")
    assert response.status_code == 200
    assert response.json()["results"][0]["groups"][0]["code"] == "53-3032"


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({}, "texts", "This field is required."),
        ({"texts": []}, "texts", "This list may not be empty."),
        ({"texts": "nurse"}, "texts", 'Expected a list of items but got type "str".'),
        ({"texts": ["ok", "   "]}, "texts", "is empty"),
        ({"texts": [""]}, "texts", "is empty"),
        ({"texts": [None]}, "texts", "This field may not be null."),
        ({"texts": ["x" * 201]}, "texts", "longer than 200 characters"),
        ({"texts": ["tab\tok", "nul\x00"]}, "texts", "control characters"),
        ({"texts": ["admin\u202egnp.exe"]}, "texts", "bidirectional controls"),
        ({"texts": [7]}, "texts", "must be a string"),
        ({"texts": ["nurse"], "k": 0}, "k", "greater than or equal to 1"),
        ({"texts": ["nurse"], "k": 51}, "k", "at most 50"),
        ({"texts": ["nurse"], "k": "many"}, "k", "A valid integer is required."),
    ],
)
def test_bad_input_is_a_400_naming_the_field(api_client, tiny_taxonomy, body, field, message):
    response = api_client.post(URL, body, format="json")
    assert response.status_code == 400
    errors = response.json()
    assert list(errors) == [field]
    assert message in str(errors[field])


def test_too_many_texts_are_refused(api_client, tiny_taxonomy, settings):
    settings.SIAMWEB_MAX_TEXTS_PER_REQUEST = 3
    response = api_client.post(URL, {"texts": ["a b", "c d", "e f", "g h"]}, format="json")
    assert response.status_code == 400
    assert response.json() == {"texts": ["at most 3 texts per request"]}


def test_malformed_json_is_a_400(api_client, tiny_taxonomy):
    response = api_client.post(URL, data="{not json", content_type="application/json")
    assert response.status_code == 400
    assert "JSON parse error" in response.json()["detail"]


def test_an_unknown_taxonomy_is_a_404(api_client, tiny_taxonomy):
    response = api_client.post("/api/v1/taxonomies/nope/normalize", {"texts": ["x"]}, format="json")
    assert response.status_code == 404
    assert response.json() == {"detail": "no taxonomy 'nope'"}


def test_a_taxonomy_without_a_model_is_a_409_naming_it_that_says_what_to_run(api_client):
    Taxonomy.objects.create(slug="bare", name="Bare")
    response = api_client.post("/api/v1/taxonomies/bare/normalize", {"texts": ["x"]}, format="json")
    assert response.status_code == 409
    (message,) = response.json()["taxonomy"]  # the field in conflict, as every 409 names it
    assert "manage.py train bare --activate" in message


def test_a_form_encoded_body_is_refused_as_not_json(api_client, tiny_taxonomy):
    response = api_client.post(URL, {"texts": "nurse"})  # multipart form
    assert response.status_code == 415
    assert "Unsupported media type" in response.json()["detail"]


@pytest.mark.parametrize("k", [2, 20, 30])
def test_k_groups_are_answered_when_the_taxonomy_has_them(db, tmp_path, curator, k):
    """A taxonomy with 30 groups, no descriptions, and a text whose nearest members crowd one
    group: asked for k groups, the answer has k (it used to stop at the groups its nearest
    members named, and at 15 however large k was)."""
    from annotations.services.taxonomy import taxonomy_import
    from models_app.serving.normalize import rank_taxonomy_groups
    from tests.conftest import build_live_model

    rows = ["group_code,group_name,text"]
    rows += [f"N-1,Registered Nurses,Registered Nurse {i}" for i in range(12)]
    for g in range(29):
        rows += [f"G-{g},Trade {g},Trade worker {g} {word}" for word in ("a", "bb", "ccc")]
    path = tmp_path / "wide.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    taxonomy = taxonomy_import(slug="wide", path=path, fmt="csv").taxonomy
    build_live_model(taxonomy)
    (answer,) = rank_taxonomy_groups(taxonomy, ["Registered Nurses"], k=k)
    assert len(answer.groups) == k
    assert len({group.group_id for group in answer.groups}) == k
    assert answer.groups[0].name == "Registered Nurses"


def test_an_answer_with_no_evidence_is_low_confidence_without_a_probability(
    api_client, tiny_taxonomy, without_starter
):
    """ "10" shares nothing with any member (similarity 0): with no calibrated ranker to read
    there is no probability, and the answer is still flagged instead of served as sure."""
    response = api_client.post(URL, {"texts": ["10", "icu nurse"], "k": 2}, format="json")
    nothing, nurse = response.json()["results"]
    assert nothing["probability"] is None and nothing["groups"][0]["score"] == 0.0
    assert nothing["low_confidence"] is True
    assert nurse["groups"][0]["score"] > 0 and nurse["low_confidence"] is False


def test_a_none_of_these_verdict_is_the_answer_at_once_and_undone_gives_it_back(
    api_client, tiny_taxonomy, curator
):
    """After "none of these" on a text, normalize answers with the curators' verdict (no
    group), as it does with a group they chose: in the API, in a batch and in bulk output."""
    before = api_client.post(URL, {"texts": ["Coffee expert (Java, Yemen)"]}, format="json")
    assert before.json()["results"][0]["groups"]  # the model offers groups
    (item,) = inputs_submit(taxonomy=tiny_taxonomy, texts=["Coffee expert (Java, Yemen)"],
                            source="api")  # fmt: skip
    judgement = judgement_create(review_item=item, user=curator, verdict="none")

    response = api_client.post(
        URL, {"texts": ["coffee expert (java, yemen)", "icu nurse"]}, format="json"
    )
    judged, other = response.json()["results"]
    assert (judged["none_of_these"], judged["source"], judged["groups"]) == (True, "curator", [])
    assert (judged["probability"], judged["low_confidence"]) == (None, False)
    assert other["none_of_these"] is False and other["groups"]
    job = bulk_job_create(
        taxonomy=tiny_taxonomy, upload=io.BytesIO(b"Coffee expert (Java, Yemen)\n"),
        filename="t.txt", user=curator,
    )  # fmt: skip
    (row,) = result_rows(bulk_job_execute(job_id=job.id))
    assert (row["none_of_these"], row["source"], row["group_code"], row["error"]) == (
        "True",
        "curator",
        "",
        "",
    )

    judgement_undo(judgement=judgement, user=curator)
    again = api_client.post(URL, {"texts": ["Coffee expert (Java, Yemen)"]}, format="json")
    assert again.json()["results"][0]["none_of_these"] is False
    assert again.json()["results"][0]["groups"]
