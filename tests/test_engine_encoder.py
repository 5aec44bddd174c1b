from __future__ import annotations

import numpy as np
import pytest

from models_app.siamese.artifacts import ArtifactError, atomic_directory
from models_app.siamese.configs import ConfigError
from models_app.siamese.encoders import fit_encoder, load_encoder, parse_config

TITLES = [
    "Java Developer",
    "Java Software Engineer",
    "Python Developer",
    "Registered Nurse",
    "ICU Nurse",
    "Staff Nurse",
    "Barista",
    "Coffee Shop Barista",
    "Truck Driver",
    "Long Haul Truck Driver",
]


@pytest.fixture(scope="module")
def encoder():
    return fit_encoder(TITLES, {"dim": 8, "min_df": 1})


def test_it_encodes_to_unit_vectors_of_the_configured_size(encoder):
    vectors = encoder.encode(["java developer", "nurse", "barista"])
    assert vectors.shape == (3, 8)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)


def test_a_typo_stays_closer_to_its_title_than_to_other_titles(encoder):
    query, same, other = encoder.encode(["Java Develper", "Java Developer", "Registered Nurse"])
    assert query @ same > query @ other + 0.2


def test_unknown_characters_encode_to_a_zero_vector_not_an_error(encoder):
    vector = encoder.encode(["日本語"])
    assert vector.shape == (1, 8)
    assert not np.isnan(vector).any()


def test_it_round_trips_through_disk(encoder, tmp_path):
    with atomic_directory(tmp_path / "model") as folder:
        encoder.save(folder)
    loaded = load_encoder(tmp_path / "model")
    np.testing.assert_array_equal(loaded.encode(TITLES), encoder.encode(TITLES))


def test_fitting_is_deterministic():
    first = fit_encoder(TITLES, {"dim": 8, "min_df": 1}).encode(TITLES)
    second = fit_encoder(TITLES, {"dim": 8, "min_df": 1}).encode(TITLES)
    np.testing.assert_allclose(first, second, atol=1e-5)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"kind": "word2vec"}, "unknown encoder kind 'word2vec'"),
        ({"dim": 1}, "dim must be between 2 and 4096"),
        ({"dim": "big"}, "dim must be an integer, got 'big'"),
        ({"dim": 2.5}, "dim must be an integer, got 2.5"),
        ({"ngram_min": 4, "ngram_max": 2}, "ngram_min <= ngram_max"),
        ({"min_df": 0}, "min_df must be at least 1"),
        ({"layers": 4}, "unknown option"),
    ],
)
def test_it_refuses_impossible_configs(config, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(config)


def test_it_refuses_an_empty_taxonomy():
    with pytest.raises(ConfigError, match="empty taxonomy"):
        fit_encoder([], {})


def test_a_half_written_model_folder_is_never_loaded(encoder, tmp_path):
    with pytest.raises(RuntimeError, match="disk full"), atomic_directory(tmp_path / "m") as folder:
        encoder.save(folder)
        raise RuntimeError("disk full")
    assert not (tmp_path / "m").exists()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ArtifactError, match="not a complete artifact"):
        load_encoder(tmp_path / "m")


def test_a_corrupt_model_file_is_a_clear_error(encoder, tmp_path):
    with atomic_directory(tmp_path / "model") as folder:
        encoder.save(folder)
    (tmp_path / "model" / "projection.npy").write_bytes(b"garbage")
    with pytest.raises(ArtifactError, match="unreadable"):
        load_encoder(tmp_path / "model")


def test_artifacts_are_never_overwritten(encoder, tmp_path):
    with atomic_directory(tmp_path / "model") as folder:
        encoder.save(folder)
    with pytest.raises(ArtifactError, match="already exists"), atomic_directory(tmp_path / "model"):
        pass
