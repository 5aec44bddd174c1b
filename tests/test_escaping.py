"""User-supplied texts — inputs, member strings, group names and descriptions, a taxonomy's name —
are escaped on every page that shows them: a taxonomy and inputs holding markup never put that
markup into a page's HTML."""

from __future__ import annotations

import pytest

from annotations.models import Group, Input, Member
from annotations.services.review.inputs import inputs_submit
from annotations.services.review.leases import review_item_claim
from annotations.services.review.verdicts import judgement_create
from annotations.services.taxonomy import taxonomy_import
from annotations.services.taxonomy_edit.groups import group_rename
from annotations.services.taxonomy_edit.members import member_add
from tests.conftest import build_live_model

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(2)>'
RAW = ("<script>alert(", "<img src=x onerror")
ESCAPED = ("&lt;script&gt;alert(", "&lt;img src=x onerror", "\\u003Cscript\\u003Ealert(")


@pytest.fixture
def evil(db, tmp_path, admin_user, curator):
    csv = tmp_path / "evil.csv"
    csv.write_text(
        "group_code,group_name,text,description\n"
        f'EV-1,{SCRIPT} Nurses,"{IMG.replace(chr(34), chr(34) * 2)} nurse",{SCRIPT}\n'
        f"EV-1,{SCRIPT} Nurses,Registered Nurse,\n"
        "15-1252,Software Developers,Software Developer,\n"
        "15-1252,Software Developers,Python Developer,\n",
        encoding="utf-8",
    )
    taxonomy = taxonomy_import(slug="evil", path=csv, fmt="csv", name=f"{SCRIPT} jobs").taxonomy
    build_live_model(taxonomy)
    group = Group.objects.get(taxonomy=taxonomy, code="15-1252")
    group_rename(group=group, name=f"{IMG} Developers", user=admin_user)
    member_add(group=group, text=f"{SCRIPT} coder", user=admin_user)
    inputs_submit(
        taxonomy=taxonomy, texts=[f"{SCRIPT} nurse", f"{IMG} developer"], source=Input.Source.API
    )
    judged = review_item_claim(user=curator)
    judgement_create(review_item=judged, user=curator, verdict="confirm", group=None)
    assert Member.objects.filter(text__contains="<script>").exists()
    return {"taxonomy": taxonomy, "group": group}


def pages(evil) -> dict[str, str]:
    slug = evil["taxonomy"].slug
    return {
        "review card": "/review/",
        "queue": "/review/queue/",
        "batch groups": f"/review/batch/{slug}/",
        "batch": f"/review/batch/{slug}/15-1252/",
        "audit": "/audit/",
        "playground": "/playground/",
        "playground results": f"/playground/results?taxonomy={slug}&text=%3Cscript%3Ealert(1)",
        "taxonomy list": "/taxonomies/",
        "taxonomy": f"/taxonomies/{slug}/",
        "group": f"/taxonomies/{slug}/groups/EV-1/",
        "other group": f"/taxonomies/{slug}/groups/15-1252/",
        "inputs": "/inputs/",
        "models": f"/models/?taxonomy={slug}",
    }


@pytest.mark.parametrize(
    "page",
    [
        "review card",
        "queue",
        "batch groups",
        "batch",
        "audit",
        "playground",
        "playground results",
        "taxonomy list",
        "taxonomy",
        "group",
        "other group",
        "inputs",
        "models",
    ],
)
def test_markup_in_user_texts_is_shown_escaped(client, admin_user, evil, page):
    client.force_login(admin_user)
    response = client.get(pages(evil)[page])
    assert response.status_code == 200
    html = response.content.decode()
    for raw in RAW:
        assert raw not in html, raw
    assert any(escaped in html for escaped in ESCAPED), "the page shows none of the texts"
