"""The tower served compiled: ONNX Runtime answers as PyTorch does within int8's noise, a text
the same alone as in any batch; a compiled copy missing, stale or damaged leaves PyTorch
serving, said once, until the copy is compiled again."""

from __future__ import annotations

import copy
import json
import logging
import multiprocessing
import shutil

import numpy as np
import pytest
import torch

from models_app.siamese import compiled
from models_app.siamese.encoders import compile_encoder, load_encoder, parse_config
from models_app.siamese.networks.ngram_bag import NgramBagConfig, NgramBagEncoder
from models_app.siamese.towers import TransformerEncoder, token_batches

TITLES = [
    "Registered Nurse",
    "RN night shift",
    "Senior Java Developer (m/w/d) - remote, 60k",
    "HGV Class 1 Driver",
    "Barista",
    "Koch/Köchin in Vollzeit gesucht ab sofort für unser Restaurant am Hafen",
    "CEO",
    "x",
    "Data Scientist / Machine Learning Engineer (NLP, Python, PyTorch) - London or remote",
    "Teaching Assistant - SEN",
    "物流经理",
    "Delivery Driver " * 20,  # longer than max_length: cut as PyTorch cuts it
]
MEMBERS = ["Registered Nurses", "Software Developers", "Heavy Truck Drivers", "Baristas", "Cooks"]


@pytest.fixture(scope="module")
def compiled_version(tmp_path_factory):
    """A version folder of the bundled tower, compiled once for the module."""
    folder = tmp_path_factory.mktemp("tower") / "version"
    TransformerEncoder.create([], parse_config({"kind": "transformer"})).save(folder)
    assert compile_encoder(folder)
    return folder


@pytest.fixture
def version(compiled_version, tmp_path):
    """This test's own copy of the compiled version, to damage as it likes."""
    folder = tmp_path / "version"
    shutil.copytree(compiled_version, folder, ignore=shutil.ignore_patterns("mapped-weights"))
    return folder


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1)


def test_the_compiled_tower_answers_as_pytorch_within_int8s_noise(version):
    served = load_encoder(version, mapped=True)
    pytorch = load_encoder(version)
    assert (served.runtime, pytorch.runtime) == ("onnxruntime", "pytorch")
    vectors, reference = served.encode(TITLES), pytorch.encode(TITLES)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    # Within int8's noise, on any x86-64: real titles stay above 0.99, odd ones ("x", Chinese)
    # above the cosine the product demands of its probes before it serves a compiled model.
    # How far below 1 depends on the CPU's int8 kernel: an AVX2 CPU without VNNI sums u8 x s8
    # pairs in 16 bits, which can saturate (Chinese came out at 0.983 on such a CPU).
    found = dict(zip(TITLES, cosines(vectors, reference).tolist(), strict=True))
    odd = {"x", "物流经理"}
    assert min(c for title, c in found.items() if title not in odd) > 0.99, found
    assert min(found[title] for title in odd) > compiled.PROBE_MIN_COSINE, found
    # Each title finds the member PyTorch finds.
    members_compiled, members_pytorch = served.encode(MEMBERS), pytorch.encode(MEMBERS)
    np.testing.assert_array_equal(
        (vectors[:5] @ members_compiled.T).argmax(axis=1),
        (reference[:5] @ members_pytorch.T).argmax(axis=1),
    )


def test_a_text_gets_the_same_vector_alone_as_in_any_batch(version):
    """Activations are quantised per token: a batch's other texts (their largest activation,
    their padding) cannot move a text's vector, as one scale per tensor did by 0.01 in cosine."""
    served = load_encoder(version, mapped=True)
    batched = served.encode(TITLES)
    alone = np.concatenate([served.encode([title]) for title in TITLES])
    np.testing.assert_allclose(alone, batched, atol=1e-5)
    reversed_batch = served.encode(TITLES[::-1])[::-1]
    np.testing.assert_allclose(reversed_batch, batched, atol=1e-5)


def test_token_batches_hold_every_text_once_cut_to_their_longest(version):
    tower = load_encoder(version)
    texts = [title for title in TITLES for _ in range(3)]
    seen = []
    for rows, features in token_batches(tower.featurize, texts, batch_size=8):
        seen.extend(rows.tolist())
        mask = features["attention_mask"]
        assert mask.shape[0] == len(rows) <= 8
        assert int(mask[:, -1].max()) == 1  # no column of padding alone
        alone = tower.featurize([texts[rows[0]]])
        assert torch.equal(features["input_ids"][0, : alone["input_ids"].shape[1]],
                           alone["input_ids"][0])  # fmt: skip
    assert sorted(seen) == list(range(len(texts)))


def test_a_fine_tune_copies_the_served_tower_without_its_compiled_model(version):
    served = load_encoder(version, mapped=True)
    copied = copy.deepcopy(served)
    assert copied.compiled is None and copied.runtime == "pytorch"
    assert served.runtime == "onnxruntime"


def test_a_forked_process_encodes_with_the_session_its_parent_made(version):
    """gunicorn's master loads the engines with one thread and forks its workers: a session of
    one thread starts no thread pool, so a child uses it as it is (and shares its pages)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        served = load_encoder(version, mapped=True)
        expected = served.encode(TITLES)
        context = multiprocessing.get_context("fork")
        answers = context.Queue()
        child = context.Process(target=lambda: answers.put(served.encode(TITLES).tolist()))
        child.start()
        got = answers.get(timeout=600)  # a guard against a hang, not a measure of speed
        child.join()
    finally:
        torch.set_num_threads(threads)
    assert child.exitcode == 0
    np.testing.assert_allclose(np.array(got, np.float32), expected, atol=1e-6)


def other_version(folder, tmp_path):
    """Another version's folder: the same tower with one weight moved, not compiled."""
    tower = load_encoder(folder)
    with torch.no_grad():
        next(tower.model.parameters())[0, 0] += 0.5
    other = tmp_path / "other"
    tower.save(other)
    return other


def damage_missing(folder, tmp_path):
    shutil.rmtree(folder / compiled.COMPILED_FOLDER)


def damage_stale(folder, tmp_path):
    """The compiled copy of this version put into another version's folder."""
    other = other_version(folder, tmp_path)
    shutil.copytree(folder / compiled.COMPILED_FOLDER, other / compiled.COMPILED_FOLDER)
    shutil.rmtree(folder)
    other.rename(folder)


def damage_corrupt(folder, tmp_path):
    path = folder / compiled.COMPILED_FOLDER / "model.onnx"
    data = bytearray(path.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))


def damage_truncated(folder, tmp_path):
    path = folder / compiled.COMPILED_FOLDER / "model.onnx"
    path.write_bytes(path.read_bytes()[:1000])


def damage_probes(folder, tmp_path):
    """A manifest whose PyTorch vectors are not this model's answers."""
    path = folder / compiled.COMPILED_FOLDER / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["probe_vectors"] = np.roll(manifest["probe_vectors"], 1, axis=0).tolist()
    path.write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (damage_missing, "is missing"),
        (damage_stale, "is stale: compiled from other files"),
        (damage_corrupt, "is damaged"),
        (damage_truncated, "is damaged"),
        (damage_probes, "answers a probe text unlike PyTorch"),
    ],
)
def test_a_compiled_copy_that_cannot_serve_leaves_pytorch_serving_said_once(
    version, tmp_path, caplog, damage, reason
):
    damage(version, tmp_path)
    with caplog.at_level(logging.WARNING, logger="models_app.siamese.compiled"):
        served = load_encoder(version, mapped=True)
        answers = [served.encode(TITLES) for _ in range(3)]
    assert served.runtime == "pytorch"
    np.testing.assert_allclose(answers[0], load_encoder(version).encode(TITLES), atol=1e-6)
    [record] = [r for r in caplog.records if r.name == "models_app.siamese.compiled"]
    assert reason in record.getMessage() and str(version) in record.getMessage()


@pytest.mark.parametrize("damage", [damage_stale, damage_corrupt])
def test_the_served_tower_takes_up_a_copy_compiled_again(version, tmp_path, caplog, damage):
    damage(version, tmp_path)
    served = load_encoder(version, mapped=True)
    served.compiled.recheck_seconds = 0.0  # look at every encode, not once a minute
    assert served.runtime == "pytorch"
    assert compile_encoder(version)  # the worker's compile
    assert not compile_encoder(version)  # once current, nothing to do
    with caplog.at_level(logging.INFO, logger="models_app.siamese.compiled"):
        assert served.runtime == "onnxruntime"
    assert "serves again" in caplog.text
    reference = load_encoder(version).encode(TITLES)
    assert cosines(served.encode(TITLES), reference).min() > 0.98
    assert not list(version.glob(".stale-*"))  # the set-aside copy is gone


def test_the_student_is_not_compiled(tmp_path):
    student = NgramBagEncoder(NgramBagConfig(buckets=1024, embedding_dim=8, output_dim=8))
    student.save(tmp_path)
    assert compile_encoder(tmp_path) is False
    assert not (tmp_path / compiled.COMPILED_FOLDER).exists()
    assert not hasattr(load_encoder(tmp_path, mapped=True), "compiled")
