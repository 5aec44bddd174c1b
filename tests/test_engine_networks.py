from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from models_app.siamese.artifacts import ArtifactError, atomic_directory
from models_app.siamese.configs import ConfigError
from models_app.siamese.encoders import as_stored, encoder_class, load_encoder, parse_config
from models_app.siamese.networks.base import stable_hash
from models_app.siamese.networks.ngram_bag import (
    ngram_bag_id_rows,
    ngram_bag_ids,
    training_ngram_bag_ids,
)
from models_app.siamese.text import comparison_key
from models_app.siamese.tfidf import char_ngrams

TITLES = [
    "Java Developer",
    "Senior Java Developer",
    "Python Developer",
    "Registered Nurse",
    "ICU Nurse",
    "Barista",
    "Coffee Shop Barista",
    "Truck Driver",
]
SMALL = {
    "char_bilstm": {"layers": 2, "hidden": 8, "char_embedding": 8, "output_dim": 16},
    "ngram_bag": {"buckets": 1024, "embedding_dim": 16, "output_dim": 16},
    "conv_words": {
        "min_count": 1,
        "hash_buckets": 64,
        "embedding_dim": 8,
        "filters": 16,
        "output_dim": 16,
    },
    "s2net": {"min_df": 1, "output_dim": 8},
}


def build(kind: str):
    torch.manual_seed(0)
    config = parse_config({"kind": kind, **SMALL[kind]})
    return encoder_class(kind).create(TITLES, config)


@pytest.mark.parametrize("kind", sorted(SMALL))
def test_every_encoder_gives_unit_vectors_of_its_dimension(kind):
    encoder = build(kind)
    vectors = encoder.encode(["java dev", "nurse", "senior barista " * 20])
    assert vectors.shape == (3, encoder.dim)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-4)


@pytest.mark.parametrize("kind", sorted(SMALL))
def test_text_with_nothing_known_encodes_without_nan(kind):
    vectors = build(kind).encode(["日本語", "\u2169\u2169"])  # CJK, Roman numerals
    assert not np.isnan(vectors).any()


@pytest.mark.parametrize("kind", sorted(SMALL))
def test_every_encoder_round_trips_through_disk_in_half_precision(kind, tmp_path):
    encoder = build(kind)
    with atomic_directory(tmp_path / "m") as folder:
        encoder.save(folder)
    loaded = load_encoder(tmp_path / "m")
    before, after = encoder.encode(TITLES), loaded.encode(TITLES)
    cosines = (before * after).sum(axis=1)
    assert cosines.min() > 0.999
    # The nearest title of every title is unchanged by float16 storage.
    assert ((before @ before.T).argsort(1)[:, -2] == (after @ after.T).argsort(1)[:, -2]).all()


@pytest.mark.parametrize("kind", ["ngram_bag", "char_bilstm"])
def test_as_stored_answers_as_the_saved_and_loaded_encoder_does(kind, tmp_path, monkeypatch):
    import tempfile

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    encoder = build(kind)
    with atomic_directory(tmp_path / "m") as folder:
        encoder.save(folder)
    loaded = load_encoder(tmp_path / "m")
    stored = as_stored(encoder)
    assert stored is not encoder
    np.testing.assert_array_equal(stored.encode(TITLES), loaded.encode(TITLES))
    assert not np.array_equal(stored.encode(TITLES), encoder.encode(TITLES))  # stored smaller
    assert list(scratch.iterdir()) == []  # its scratch folder is gone


def test_the_bilstm_encodes_a_string_the_same_alone_or_beside_longer_ones():
    encoder = build("char_bilstm")
    alone = encoder.encode(["nurse"])
    in_batch = encoder.encode(["nurse", "a much longer job title with many words"])[:1]
    np.testing.assert_allclose(alone, in_batch, atol=1e-5)


def test_training_places_the_string_at_a_random_offset_in_a_padded_sequence():
    import random

    encoder = build("char_bilstm")
    features = encoder.featurize(["nurse", "nurse"], train=True, rng=random.Random(3))
    assert features["ids"].shape == (2, encoder.config.max_length)
    starts = features["mask"].float().argmax(dim=1).tolist()
    assert starts[0] != starts[1]
    assert features["mask"].sum(dim=1).tolist() == [5, 5]
    inference = encoder.featurize(["nurse"], train=False)
    assert inference["ids"].shape == (1, 5)  # no padding cost


def test_the_paper_defaults_are_the_bilstm_defaults():
    config = parse_config({"kind": "char_bilstm"})
    assert (config.layers, config.hidden, config.output_dim, config.max_length) == (4, 64, 128, 100)
    assert (config.recurrent_dropout, config.layer_dropout) == (0.2, 0.4)
    encoder = encoder_class("char_bilstm").create([], config)
    assert encoder.lstm.bidirectional and encoder.lstm.num_layers == 4


def test_conv_words_hashes_unknown_words_instead_of_dropping_them():
    encoder = build("conv_words")
    known = encoder.featurize(["java developer"])["ids"][0].tolist()
    unknown = encoder.featurize(["zyxwv developer"])["ids"][0].tolist()
    assert 0 not in known[:2]
    assert unknown[0] > len(encoder.vocabulary)  # a hashed bucket, not padding
    assert unknown[1] == known[1]


@pytest.mark.parametrize(
    "text", ["Java Developer", "  SENIOR   java-dev (m/w/d) ", "ﬁle Clerk Straße", "", "!!"]
)
def test_ngram_bag_ids_are_the_distinct_char_ngrams_then_the_words_hashed(text):
    config = parse_config({"kind": "ngram_bag", **SMALL["ngram_bag"]})
    key = comparison_key(text)
    tokens = list(char_ngrams(key, config.ngram_min, config.ngram_max))
    tokens += [f"w:{word}" for word in re.findall(r"\w+", key)]
    expected = [stable_hash(token) % config.buckets for token in tokens] or [0]

    ids = ngram_bag_ids(text, config)

    assert ids.tolist() == expected  # a saved model's buckets stay where they were
    assert ids.dtype == np.int32
    with pytest.raises(ValueError, match="read-only"):
        ids[0] = 1  # kept in the cache: a caller writing to it would change every later text


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"ngram_min": 1, "ngram_max": 5, "words": False},
        {"ngram_min": 2, "ngram_max": 3, "buckets": 2**24},
        {"ngram_min": 4, "ngram_max": 8},
    ],
)
@pytest.mark.parametrize("ascii_only", [True, False])
def test_many_texts_hashed_at_once_get_each_texts_own_ids(options, ascii_only):
    # ASCII texts are told apart by their code points, others by the batch's characters
    # numbered, and 8-grams over 50 CJK characters by every character (no 64-bit key holds them).
    config = parse_config({"kind": "ngram_bag", **SMALL["ngram_bag"], **options})
    rng = np.random.default_rng(7)
    letters = list("abcdefghij JAVA-dev/(m) 12_3.,!")
    if not ascii_only:
        letters += ["é", "ß", "ﬁ", "\u00a0", "🙂", "\u2019", *map(chr, range(0x4E00, 0x4E32))]
    texts = ["", " ", "!!", "Java Developer", "a", "ab", "abc", "aaaa aaaa"]
    texts += [] if ascii_only else ["Straße", "中中中中中中中中中中"]
    for _ in range(1500):
        size = int(rng.integers(0, 30))
        texts.append("".join(letters[i] for i in rng.choice(len(letters), size=size)))

    flat, lengths = ngram_bag_id_rows(texts, config)

    rows = [ngram_bag_ids(text, config) for text in texts]
    assert lengths.tolist() == [len(row) for row in rows]
    assert flat.tolist() == np.concatenate(rows).tolist()  # the same buckets, in the same order
    assert flat.dtype == np.int32 and lengths.dtype == np.int64


def test_no_texts_hashed_at_once_are_no_ids():
    config = parse_config({"kind": "ngram_bag", **SMALL["ngram_bag"]})
    flat, lengths = ngram_bag_id_rows([], config)
    assert (flat.tolist(), lengths.tolist()) == ([], [])


def test_ngram_bag_featurizes_the_same_while_training_from_the_kept_ids_and_cold():
    encoder = build("ngram_bag")
    texts = ["Java Developer", "Barista", "", "Java Developer"]
    training_ngram_bag_ids.cache_clear()
    cold = encoder.featurize(texts)  # inference keeps nothing
    assert training_ngram_bag_ids.cache_info().currsize == 0
    first = encoder.featurize(texts, train=True)
    kept = encoder.featurize(texts, train=True)
    assert training_ngram_bag_ids.cache_info().hits >= len(texts)
    for name in ("ids", "offsets"):
        assert torch.equal(cold[name], first[name])
        assert torch.equal(cold[name], kept[name])
        assert cold[name].dtype == torch.long
    lengths = [len(ngram_bag_ids(t, encoder.config)) for t in texts]
    assert cold["offsets"].tolist() == np.cumsum([0, *lengths[:-1]]).tolist()
    assert len(cold["ids"]) == sum(lengths)


def test_kept_ids_belong_to_their_config():
    small = build("ngram_bag")
    config = parse_config({"kind": "ngram_bag", **SMALL["ngram_bag"], "buckets": 512})
    other = encoder_class("ngram_bag").create(TITLES, config)
    small.featurize(["Java Developer"], train=True)
    ids = other.featurize(["Java Developer"], train=True)["ids"]
    assert ids.tolist() == ngram_bag_ids("Java Developer", config).tolist()
    assert int(ids.max()) < 512


def test_ngram_bag_keeps_only_rows_some_training_string_reaches_and_frees_the_kept_ids():
    encoder = build("ngram_bag")
    encoder.featurize(["Barista"], train=True)
    encoder.after_training(["Barista", "Truck Driver"])
    reached = {
        *ngram_bag_ids("Barista", encoder.config),
        *ngram_bag_ids("Truck Driver", encoder.config),
    }
    nonzero = set(encoder.bag.weight.abs().sum(dim=1).nonzero().squeeze(1).tolist())
    assert nonzero == reached
    assert training_ngram_bag_ids.cache_info().currsize == 0


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"kind": "char_bilstm", "layers": 0}, "layers must be between 1 and 8"),
        ({"kind": "char_bilstm", "layer_dropout": 1.0}, "layer_dropout must be in"),
        ({"kind": "ngram_bag", "buckets": 3}, "buckets must be between"),
        ({"kind": "conv_words", "width": 0}, "width must be between"),
        ({"kind": "s2net", "output_dim": 1}, "output_dim must be between"),
        ({"kind": "ngram_bag", "layers": 2}, "unknown option"),
        ({"kind": "char_bilstm", "hidden": 2.5}, "hidden must be an integer"),
        ({"kind": "ngram_bag", "words": "yes"}, "words must be true or false"),
    ],
)
def test_impossible_network_configs_are_refused(config, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(config)


def test_weights_from_another_config_are_a_clear_error(tmp_path):
    encoder = build("ngram_bag")
    with atomic_directory(tmp_path / "m") as folder:
        encoder.save(folder)
    manifest = (tmp_path / "m" / "manifest.json").read_text()
    (tmp_path / "m" / "manifest.json").write_text(
        manifest.replace('"output_dim": 16', '"output_dim": 32')
    )
    with pytest.raises(ArtifactError, match="do not fit the config"):
        load_encoder(tmp_path / "m")
