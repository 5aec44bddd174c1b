from __future__ import annotations

import numpy as np
import pytest

from models_app.siamese.artifacts import ArtifactError, atomic_directory
from models_app.siamese.group_hits import rank_groups
from models_app.siamese.index import MemberIndex


def unit(rows):
    vectors = np.asarray(rows, dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture
def index():
    return MemberIndex.build(unit([[1, 0, 0], [0, 1, 0], [0.9, 0.1, 0]]), np.array([101, 202, 303]))


def test_search_returns_member_ids_best_first(index):
    scores, ids = index.search(unit([[1, 0.05, 0]]), 3)
    assert ids[0].tolist() == [101, 303, 202]
    assert scores[0][0] == pytest.approx(0.9988, abs=1e-3)
    assert scores[0][0] >= scores[0][1] >= scores[0][2]


def test_asking_for_more_neighbours_than_members_pads_with_minus_one(index):
    _, ids = index.search(unit([[0, 1, 0]]), 5)
    assert ids[0].tolist()[3:] == [-1, -1]


def test_an_empty_index_finds_nothing():
    empty = MemberIndex.build(np.zeros((0, 3), np.float32), np.zeros(0, np.int64))
    _, ids = empty.search(unit([[1, 0, 0]]), 2)
    assert ids.tolist() == [[-1, -1]]


def test_it_refuses_mismatched_inputs(index):
    with pytest.raises(ValueError, match="dim 2"):
        index.search(np.ones((1, 2), np.float32), 1)
    with pytest.raises(ValueError, match="unique"):
        MemberIndex.build(unit([[1, 0], [0, 1]]), np.array([7, 7]))
    with pytest.raises(ValueError, match="2 vectors but 1 ids"):
        MemberIndex.build(unit([[1, 0], [0, 1]]), np.array([7]))


def test_it_round_trips_through_disk(index, tmp_path):
    with atomic_directory(tmp_path / "idx") as folder:
        index.save(folder)
    loaded = MemberIndex.load(tmp_path / "idx")
    assert len(loaded) == 3
    assert loaded.search(unit([[0, 1, 0]]), 1)[1].tolist() == [[202]]


def test_a_corrupt_index_file_is_a_clear_error(index, tmp_path):
    with atomic_directory(tmp_path / "idx") as folder:
        index.save(folder)
    (tmp_path / "idx" / "members.faiss").write_bytes(b"not an index")
    with pytest.raises(ArtifactError, match="corrupt"):
        MemberIndex.load(tmp_path / "idx")


def test_groups_score_as_their_best_member_and_keep_the_evidence():
    hits = [(1, 0.9), (2, 0.8), (3, 0.7), (4, 0.6)]
    group_of = {1: 10, 2: 20, 3: 10, 4: 30}
    ranked = rank_groups(hits, group_of, k=2)
    assert [(g.group_id, g.score, g.member_id) for g in ranked] == [(10, 0.9, 1), (20, 0.8, 2)]


def test_excluded_groups_and_unknown_members_are_dropped():
    hits = [(1, 0.9), (99, 0.85), (2, 0.8), (4, 0.6)]
    ranked = rank_groups(hits, {1: 10, 2: 20, 4: 30}, k=5, excluded_groups=frozenset({10}))
    assert [g.group_id for g in ranked] == [20, 30]


def random_unit(n: int, dim: int = 16, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_members_can_be_added_and_removed_without_a_rebuild(index):
    index.add(unit([[0, 0, 1]]), np.array([404]))
    assert index.search(unit([[0, 0.1, 1]]), 1)[1].tolist() == [[404]]
    assert index.remove(np.array([404, 999])) == 1
    assert 404 not in index.search(unit([[0, 0.1, 1]]), 4)[1]
    assert sorted(index.member_ids().tolist()) == [101, 202, 303]
    with pytest.raises(ValueError, match="already in the index"):
        index.add(unit([[1, 1, 0]]), np.array([101]))


def test_an_ivf_index_finds_what_exact_search_finds_with_enough_probes(tmp_path):
    vectors, ids = random_unit(4000), np.arange(10_000, 14_000)
    exact = MemberIndex.build(vectors, ids, kind="flat")
    ivf = MemberIndex.build(vectors, ids, kind="ivf", nlist=32, nprobe=32)
    assert (exact.kind, ivf.kind, ivf.nprobe) == ("flat", "ivf", 32)
    queries = random_unit(50, seed=1)
    assert (exact.search(queries, 10)[1] == ivf.search(queries, 10)[1]).all()  # all lists probed
    ivf.set_nprobe(2)
    with atomic_directory(tmp_path / "ivf") as folder:
        ivf.save(folder)
    loaded = MemberIndex.load(tmp_path / "ivf")
    assert (loaded.kind, loaded.nprobe) == ("ivf", 2)
    found = loaded.search(queries, 10)[1]
    recall = np.mean(
        [
            len(set(a) & set(b)) / 10
            for a, b in zip(found, exact.search(queries, 10)[1], strict=True)
        ]
    )
    assert 0.2 < recall < 1.0  # two of 32 lists: fast and approximate, as configured


def test_size_chooses_the_index_kind(monkeypatch):
    from models_app.siamese import index as index_module

    monkeypatch.setattr(index_module, "EXACT_LIMIT", 1000)
    assert MemberIndex.build(random_unit(900), np.arange(900)).kind == "flat"
    assert MemberIndex.build(random_unit(1600), np.arange(1600)).kind == "ivf"
    assert index_module.ivf_lists(1_000_000) == 8000
