"""The pretrained tower: all-MiniLM-L6-v2 from its PyPI package, trained by the engine's loop."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.configs import ConfigError
from models_app.siamese.encoders import load_encoder, parse_config
from models_app.siamese.sampling import prepare_data
from models_app.siamese.specs import TrainConfig
from models_app.siamese.towers import BUNDLED_BASE, TransformerEncoder, base_model_path
from models_app.siamese.train import train_encoder

MEMBERS = [
    (0, "Java Developer"),
    (0, "Software Engineer"),
    (0, "Backend Programmer"),
    (1, "Registered Nurse"),
    (1, "Staff Nurse"),
    (1, "ICU Nurse"),
    (2, "Barista"),
    (2, "Coffee Shop Barista"),
    (2, "Espresso Bar Attendant"),
    (3, "Truck Driver"),
    (3, "Delivery Driver"),
    (3, "HGV Driver"),
]
TINY_TRAINING = TrainConfig(
    batch_size=8, learning_rate=5e-5, max_steps=3, eval_every=3, validation_share=0.0,
    loss_params={"scale": 20.0}, seed=0,
)  # fmt: skip


@pytest.fixture(scope="module")
def tower():
    return TransformerEncoder.create([], parse_config({"kind": "transformer"}))


def test_bundled_tower_knows_what_job_titles_mean_before_any_training(tower):
    vectors = tower.encode(["RN", "Registered Nurse", "Truck Driver", "Chief Executive Officer"])
    assert vectors.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-4)
    nurse, driver = vectors[1], vectors[2]
    # An abbreviation no n-gram shares with its meaning: pretrained knowledge, not spelling.
    assert vectors[0] @ nurse > vectors[0] @ driver


def test_a_trained_tower_is_a_sentence_transformers_folder(tmp_path):
    data = prepare_data(MEMBERS, config=TINY_TRAINING)
    result = train_encoder(data, {"kind": "transformer"}, TINY_TRAINING)
    assert result.steps == 3 and result.device == "cpu"
    result.encoder.save(tmp_path)
    from sentence_transformers import SentenceTransformer

    outside = SentenceTransformer(str(tmp_path), device="cpu")
    texts = ["java dev", "night nurse"]
    loaded = load_encoder(tmp_path)
    np.testing.assert_allclose(
        outside.encode(texts, normalize_embeddings=True), loaded.encode(texts), atol=1e-5
    )
    np.testing.assert_allclose(result.encoder.encode(texts), loaded.encode(texts), atol=1e-5)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["config"] == {"kind": "transformer", "base": BUNDLED_BASE, "max_length": 32}


def test_training_moves_the_tower_and_fine_tuning_continues_from_its_parent(tower):
    data = prepare_data(MEMBERS, config=TINY_TRAINING)
    first = train_encoder(data, {"kind": "transformer"}, TINY_TRAINING).encoder
    texts = ["Espresso Bar Attendant", "HGV Driver"]
    assert not np.allclose(first.encode(texts), tower.encode(texts), atol=1e-4)
    # As the product fine-tunes: no best-checkpoint selection (the gate judges the result).
    fine_tune = dataclasses.replace(TINY_TRAINING, select_best=False)
    before = first.encode(texts)
    child = train_encoder(data, {"kind": "transformer"}, fine_tune, parent=first).encoder
    assert not np.allclose(child.encode(texts), before, atol=1e-5)
    # The parent is copied, never trained in place: the live model stays as it was.
    np.testing.assert_array_equal(first.encode(texts), before)


def test_a_parent_of_another_kind_is_refused():
    data = prepare_data(MEMBERS, config=TINY_TRAINING)
    bag = train_encoder(
        data, {"kind": "ngram_bag", "buckets": 1024, "embedding_dim": 8, "output_dim": 8},
        TINY_TRAINING,
    ).encoder  # fmt: skip
    with pytest.raises(ConfigError, match="another encoder config"):
        train_encoder(data, {"kind": "transformer"}, TINY_TRAINING, parent=bag)


@pytest.mark.parametrize(
    "base, message",
    [
        ("sentence-transformers/all-MiniLM-L6-v2", "does not exist"),  # a hub id: never fetched
        ("/nonexistent/model", "does not exist"),
        ("", "base must name"),
    ],
)
def test_an_unknown_base_is_a_clear_error(base, message):
    with pytest.raises(ConfigError, match=message):
        base_model_path(parse_config({"kind": "transformer", "base": base}).base)


def test_a_folder_that_is_no_model_is_refused_by_name(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(ConfigError, match="not a sentence-transformers model"):
        base_model_path(str(tmp_path))


def test_a_local_base_folder_is_used_as_named(tmp_path, tower):
    tower.save(tmp_path / "base")
    config = parse_config({"kind": "transformer", "base": str(tmp_path / "base")})
    local = TransformerEncoder.create([], config)
    np.testing.assert_allclose(local.encode(["barista"]), tower.encode(["barista"]), atol=1e-5)


def test_corrupt_tower_weights_are_an_artifact_error(tmp_path, tower):
    tower.save(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"not safetensors at all")
    with pytest.raises(ArtifactError, match="cannot be loaded"):
        load_encoder(tmp_path)


@pytest.mark.parametrize("raw", [{"max_length": 2}, {"max_length": "32"}, {"layers": 3}])
def test_bad_tower_options_are_refused(raw):
    with pytest.raises(ConfigError):
        parse_config({"kind": "transformer", **raw})


def test_cuda_is_used_when_present():
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="CUDA is not available"):
            train_encoder(
                prepare_data(MEMBERS, config=TINY_TRAINING),
                {"kind": "transformer"},
                TrainConfig(device="cuda", max_steps=1),
            )
    else:
        data = prepare_data(MEMBERS, config=TINY_TRAINING)
        result = train_encoder(data, {"kind": "transformer"}, TINY_TRAINING)
        assert result.device == "cuda"
