"""On the bundled O*NET taxonomy with the shipped model, the review card's reassign search finds
what a curator types: an abbreviation, a shop-floor title, a code, a misspelling."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from annotations.services.review.inputs import inputs_submit
from annotations.services.taxonomy import taxonomy_import
from models_app.training.run_execution import taxonomy_ensure_live

ROOT = Path(__file__).resolve().parent.parent
RESULT = re.compile(
    r'<span class="name">([^<]+)</span>(?: <span class="why muted" data-testid="found-by">'
    r"([^<]+)</span>)?"
)


@pytest.fixture
def onet(db):
    taxonomy = taxonomy_import(slug="onet", path=ROOT / "data" / "onet", fmt="onet").taxonomy
    taxonomy_ensure_live(taxonomy=taxonomy, shipped=ROOT / "data" / "models" / "onet")
    return taxonomy


def search(client, item_id: int, query: str) -> list[tuple[str, str]]:
    response = client.get(f"/review/items/{item_id}/groups", {"q": query})
    assert response.status_code == 200
    return [
        (html.unescape(name), html.unescape(why) or "name")
        for name, why in RESULT.findall(response.content.decode())
    ]


@pytest.mark.slow
def test_the_search_finds_what_a_curator_types_on_onet(client, curator, onet):
    (item,) = inputs_submit(taxonomy=onet, texts=["Coffee expert (Java, Yemen)"], source="api")
    client.force_login(curator)

    rn = search(client, item.id, "RN")
    assert rn[0][0] == "Registered Nurses"
    assert rn[0][1].startswith("has “") and " RN" in rn[0][1]
    assert "Furniture Finishers" not in [name for name, _ in rn]

    hvac = search(client, item.id, "HVAC tech")
    assert hvac[0][0] == "Heating, Air Conditioning, and Refrigeration Mechanics and Installers"
    assert search(client, item.id, "UX designer")[0][0] == "Web and Digital Interface Designers"
    assert search(client, item.id, "29-1141")[0] == ("Registered Nurses", "name")
    assert search(client, item.id, "acountant")[0] == ("Accountants and Auditors", "similar")
    assert search(client, item.id, "truck driv")[0][0] == "Heavy and Tractor-Trailer Truck Drivers"
