"""The engine's big arrays served from memory-mapped files: written once, read back mapped,
answering exactly as arrays in memory do, and a damaged file is a clear error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from models_app.siamese import mapped
from models_app.siamese.artifacts import ArtifactError, atomic_directory
from models_app.siamese.encoders import encoder_class, load_encoder, parse_config
from models_app.siamese.exact_cosines import EXACT_ARTIFACT, ExactCosines
from models_app.siamese.index import MemberIndex
from models_app.siamese.mapped import mapped_arrays, read_mapped
from models_app.siamese.search import MemberSearch, SearchConfig
from tests.test_engine_networks import SMALL, TITLES

QUERIES = ["java dev", "senior nurse icu", "barista coffee", "truck", "python developer berlin"]


def file_mapped_at(address: int) -> str | None:
    """The file this process has mapped at ``address``, from /proc/self/maps.

    Anonymous memory has no name, or a bracketed one (``[heap]``, ``[stack]``),
    depending on how the allocator got it: neither is a file.
    """
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        start, end = (int(bound, 16) for bound in fields[0].split("-"))
        if start <= address < end:
            name = fields[5] if len(fields) == 6 else ""
            return name if name.startswith("/") else None
    return None


def files_mapped() -> set[str]:
    lines = Path("/proc/self/maps").read_text().splitlines()
    return {line.split(maxsplit=5)[5] for line in lines if len(line.split(maxsplit=5)) == 6}


def unit_vectors(count: int, dim: int, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_arrays_are_computed_once_then_read_back_memory_mapped(tmp_path):
    computed = []

    def compute():
        computed.append(1)
        return {"vectors": np.arange(12.0).reshape(3, 4), "ids": np.array([7, 8, 9])}

    first = mapped_arrays(tmp_path / "tables", of="test", compute=compute)
    second = mapped_arrays(tmp_path / "tables", of="test", compute=compute)

    assert len(computed) == 1
    for arrays in (first, second):
        assert isinstance(arrays["vectors"], np.memmap)
        assert not arrays["vectors"].flags.writeable
        np.testing.assert_array_equal(arrays["vectors"], np.arange(12.0).reshape(3, 4))
        assert arrays["ids"].tolist() == [7, 8, 9]


def test_a_truncated_file_is_a_clear_error(tmp_path):
    mapped_arrays(tmp_path / "tables", of="test", compute=lambda: {"grid": np.ones((100, 8))})
    path = tmp_path / "tables" / "grid.npy"
    path.write_bytes(path.read_bytes()[:-64])

    with pytest.raises(ArtifactError, match=r"grid\.npy is truncated.*delete .*tables"):
        read_mapped(tmp_path / "tables", of="test")


def test_a_missing_file_is_a_clear_error(tmp_path):
    mapped_arrays(tmp_path / "tables", of="test", compute=lambda: {"grid": np.ones((4, 8))})
    (tmp_path / "tables" / "grid.npy").unlink()

    with pytest.raises(ArtifactError, match=r"grid\.npy is missing"):
        read_mapped(tmp_path / "tables", of="test")


def test_a_folder_that_cannot_be_written_is_served_from_memory(tmp_path, monkeypatch, caplog):
    def refuse(*args, **kwargs):
        raise PermissionError("read-only volume")

    monkeypatch.setattr(mapped, "write_mapped", refuse)
    arrays = mapped_arrays(tmp_path / "tables", of="test", compute=lambda: {"a": np.ones(3)})

    assert arrays["a"].tolist() == [1.0, 1.0, 1.0] and not isinstance(arrays["a"], np.memmap)
    assert "served unshared" in caplog.text


@pytest.mark.parametrize("kind", ["flat", "ivf"])
def test_an_index_read_mapped_answers_as_one_read_into_memory(kind, tmp_path):
    vectors, ids = unit_vectors(400, 16), np.arange(400, dtype=np.int64) * 3 + 1
    built = MemberIndex.build(vectors, ids, kind=kind, nlist=8 if kind == "ivf" else None)
    with atomic_directory(tmp_path / "index") as folder:
        built.save(folder)

    loaded = MemberIndex.load(tmp_path / "index")
    shared = MemberIndex.load(tmp_path / "index", mapped=True)

    assert str(tmp_path / "index" / "members.faiss") in files_mapped()
    queries = unit_vectors(20, 16, seed=1)
    for got, expected in zip(shared.search(queries, 10), loaded.search(queries, 10), strict=True):
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(shared.vectors_of(ids[:5]), loaded.vectors_of(ids[:5]))
    with pytest.raises(ValueError, match="read-only"):
        shared.add(unit_vectors(1, 16), np.array([5_000]))


@pytest.mark.parametrize("lexical_weight", [0.0, 0.3])
def test_a_search_on_mapped_tables_answers_exactly_as_one_in_memory(lexical_weight, tmp_path):
    texts = [*TITLES, *(f"{title} {n}" for title in TITLES for n in range(40))]
    encoder = encoder_class("ngram_bag").create(texts, parse_config({"kind": "ngram_bag"}))
    vectors = encoder.encode(texts)
    # Titles listed twice share a vector, as O*NET's titles under several occupations do.
    vectors[len(TITLES) : 2 * len(TITLES)] = vectors[: len(TITLES)]
    index = MemberIndex.build(vectors, np.arange(len(texts), dtype=np.int64) + 100)
    config = SearchConfig(lexical_weight=lexical_weight)
    with atomic_directory(tmp_path / "index") as folder:
        index.save(folder)

    in_memory = MemberSearch(index, texts, config)
    written = MemberSearch(MemberIndex.load(tmp_path / "index", mapped=True), texts, config,
                           tables=tmp_path / "index")  # fmt: skip
    read = MemberSearch(MemberIndex.load(tmp_path / "index", mapped=True), texts, config,
                        tables=tmp_path / "index")  # fmt: skip

    query_vectors = encoder.encode(QUERIES)
    expected = in_memory.search(QUERIES, query_vectors, 12)
    assert written.search(QUERIES, query_vectors, 12) == expected
    assert read.search(QUERIES, query_vectors, 12) == expected
    for table in (read.exact.rough, read.exact.vector_of):
        assert isinstance(table, np.memmap)
    if lexical_weight:
        assert isinstance(read.trigrams._postings, np.memmap)
        # The trigram tables are those of these very texts: a member deleted since the build
        # (a blank text) gets its own.
        blanked = MemberSearch(read.index, ["", *texts[1:]], config, tables=tmp_path / "index")
        assert blanked.trigrams.scores("java developer")[0] == 0
        assert read.trigrams.scores("java developer")[0] > 0


def test_tables_written_before_float32_scoring_still_load(tmp_path):
    # Builds made before scores were plain float32 products hold a float64 copy too (grid.npy).
    vectors = unit_vectors(50, 16, seed=3)
    index = MemberIndex.build(vectors, np.arange(50, dtype=np.int64) + 1)
    tables = ExactCosines(vectors).arrays()
    mapped.write_mapped(tmp_path / EXACT_ARTIFACT, {**tables, "grid": vectors.astype(np.float64)},
                        of=EXACT_ARTIFACT)  # fmt: skip
    search = MemberSearch(index, [], SearchConfig(lexical_weight=0.0), tables=tmp_path)
    queries = unit_vectors(5, 16, seed=4)
    in_memory = MemberSearch(index, [], SearchConfig(lexical_weight=0.0))
    assert search.search([""] * 5, queries, 7) == in_memory.search([""] * 5, queries, 7)


@pytest.mark.parametrize("kind", [*sorted(SMALL), "char_ngram_tfidf"])
def test_every_encoder_encodes_the_same_from_mapped_weights(kind, tmp_path):
    torch.manual_seed(0)
    raw = {"kind": kind, **SMALL.get(kind, {"dim": 16, "min_df": 1})}
    if kind == "char_ngram_tfidf":
        encoder = encoder_class(kind).fit(TITLES, parse_config(raw))
    else:
        encoder = encoder_class(kind).create(TITLES, parse_config(raw))
    with atomic_directory(tmp_path / "model") as folder:
        encoder.save(folder)

    expected = load_encoder(tmp_path / "model").encode(QUERIES)
    first = load_encoder(tmp_path / "model", mapped=True)  # writes the mapped weights
    again = load_encoder(tmp_path / "model", mapped=True)  # maps them

    for loaded in (first, again):
        np.testing.assert_array_equal(loaded.encode(QUERIES), expected)
    big = max(mapped_tensors(again), key=lambda tensor: tensor.numel())
    assert str(tmp_path / "model") in (file_mapped_at(big.data_ptr()) or "")


def mapped_tensors(encoder) -> list[torch.Tensor]:
    if isinstance(encoder, torch.nn.Module):
        return list(encoder.state_dict().values())
    return [encoder.projection]


def test_a_truncated_weights_file_is_a_clear_error(tmp_path):
    torch.manual_seed(0)
    encoder = encoder_class("ngram_bag").create(TITLES, parse_config({"kind": "ngram_bag"}))
    with atomic_directory(tmp_path / "model") as folder:
        encoder.save(folder)
    load_encoder(tmp_path / "model", mapped=True)
    table = tmp_path / "model" / "mapped-weights" / "bag.weight.npy"
    table.write_bytes(table.read_bytes()[: table.stat().st_size // 2])

    with pytest.raises(ArtifactError, match=r"bag\.weight\.npy is truncated"):
        load_encoder(tmp_path / "model", mapped=True)


def test_a_mapped_encoder_fine_tunes_on_its_own_copy(tmp_path):
    """A fine-tune deep-copies its parent: the copy's weights are its own memory, and the file
    every other process maps is never written."""
    import copy

    torch.manual_seed(0)
    encoder = encoder_class("ngram_bag").create(TITLES, parse_config({"kind": "ngram_bag"}))
    with atomic_directory(tmp_path / "model") as folder:
        encoder.save(folder)
    parent = load_encoder(tmp_path / "model", mapped=True)
    table = tmp_path / "model" / "mapped-weights" / "bag.weight.npy"
    on_disk = table.read_bytes()

    child = copy.deepcopy(parent)
    with torch.no_grad():
        child.bag.weight += 1.0
        parent.bag.weight[0] += 1.0  # copy-on-write: this process's page, not the file

    assert file_mapped_at(child.bag.weight.data_ptr()) is None
    assert table.read_bytes() == on_disk


def test_a_process_that_finds_the_weights_mapped_does_not_decode_them(tmp_path, monkeypatch):
    """Only the first process to load a model decodes its saved weights (for the n-gram bag, a
    table of every bucket); every later one maps the files it wrote, so a web worker taking a
    new model holds no decoded copy even for a moment."""
    torch.manual_seed(0)
    encoder = encoder_class("ngram_bag").create(TITLES, parse_config({"kind": "ngram_bag"}))
    with atomic_directory(tmp_path / "model") as folder:
        encoder.save(folder)
    first = load_encoder(tmp_path / "model", mapped=True)
    expected = np.asarray(first.encode(TITLES))

    def no_decoding(*args, **kwargs):
        raise AssertionError("the saved weights were decoded")

    monkeypatch.setattr(torch, "load", no_decoding)
    later = load_encoder(tmp_path / "model", mapped=True)
    assert np.array_equal(np.asarray(later.encode(TITLES)), expected)
    with pytest.raises(AssertionError, match="decoded"):
        load_encoder(tmp_path / "model")  # not mapped: it decodes, as a fine-tune's parent does
