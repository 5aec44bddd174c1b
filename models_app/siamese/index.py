"""The member index: FAISS inner product over L2-normalised vectors, keyed by member id."""

from __future__ import annotations

import math
from pathlib import Path

import faiss
import numpy as np

from models_app.siamese.artifacts import ArtifactError, read_manifest, write_manifest

INDEX_ARTIFACT = "member-index"
_INDEX_FILE = "members.faiss"
# Up to this many members exact search is fast enough for a request; beyond it an inverted-file
# index trades a little recall for speed (docs/benchmarks.md, "Index: exact against IVF").
EXACT_LIMIT = 200_000


def ivf_lists(size: int) -> int:
    """Inverted lists for ``size`` vectors: 8·√N, inside the 4·√N to 16·√N range FAISS advises."""
    return max(1, min(size // 39, int(8 * math.sqrt(size))))


class MemberIndex:
    """Cosine search over L2-normalised member vectors; FAISS ids are the members' database ids.

    Exact (flat inner product) up to ``EXACT_LIMIT`` members, IVF beyond, or as asked.
    """

    def __init__(self, index: faiss.IndexIDMap2) -> None:
        self._index = index
        self._positions: tuple[np.ndarray, np.ndarray] | None = None  # for ``vectors_of``
        self.mapped = False  # read from a memory-mapped file: read-only

    @classmethod
    def build(
        cls,
        vectors: np.ndarray,
        member_ids: np.ndarray,
        *,
        kind: str = "auto",
        nlist: int | None = None,
        nprobe: int | None = None,
    ) -> MemberIndex:
        vectors = _as_matrix(vectors)
        member_ids = np.ascontiguousarray(member_ids, dtype=np.int64)
        if len(member_ids) != len(vectors):
            raise ValueError(f"{len(vectors)} vectors but {len(member_ids)} ids")
        if len(np.unique(member_ids)) != len(member_ids):
            raise ValueError("member ids must be unique")
        if kind not in {"auto", "flat", "ivf"}:
            raise ValueError(f"index kind must be auto, flat or ivf, got {kind!r}")
        if kind == "auto":
            kind = "ivf" if len(vectors) > EXACT_LIMIT else "flat"
        dim = vectors.shape[1]
        if kind == "flat":
            inner = faiss.IndexFlatIP(dim)
        else:
            nlist = nlist or ivf_lists(len(vectors))
            if len(vectors) < nlist:
                raise ValueError(f"an IVF index of {nlist} lists needs at least {nlist} vectors")
            inner = faiss.IndexIVFFlat(
                faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT
            )
            rng = np.random.default_rng(0)
            sample = vectors[rng.permutation(len(vectors))[: 256 * nlist]]
            inner.train(sample)
            inner.nprobe = nprobe or max(1, nlist // 16)
        index = faiss.IndexIDMap2(inner)
        if len(vectors):
            index.add_with_ids(vectors, member_ids)
        return cls(index)

    @property
    def kind(self) -> str:
        return (
            "ivf" if isinstance(faiss.downcast_index(self._index.index), faiss.IndexIVF) else "flat"
        )

    @property
    def nprobe(self) -> int | None:
        inner = faiss.downcast_index(self._index.index)
        return int(inner.nprobe) if isinstance(inner, faiss.IndexIVF) else None

    def set_nprobe(self, nprobe: int) -> None:
        inner = faiss.downcast_index(self._index.index)
        if not isinstance(inner, faiss.IndexIVF):
            raise ValueError("only an IVF index has nprobe")
        inner.nprobe = nprobe

    def add(self, vectors: np.ndarray, member_ids: np.ndarray) -> None:
        """Add members in place (curator members between two full builds)."""
        self._writable()
        member_ids = np.ascontiguousarray(member_ids, dtype=np.int64)
        if np.isin(member_ids, self.member_ids()).any():
            raise ValueError("some of these member ids are already in the index")
        self._index.add_with_ids(_as_matrix(vectors), member_ids)
        self._positions = None

    def remove(self, member_ids: np.ndarray) -> int:
        """Remove members in place; returns how many were there."""
        self._writable()
        selector = faiss.IDSelectorBatch(np.ascontiguousarray(member_ids, dtype=np.int64))
        self._positions = None
        return int(self._index.remove_ids(selector))

    def _writable(self) -> None:
        if self.mapped:
            raise ValueError("a memory-mapped index is read-only: load it without mapped=True")

    @property
    def dim(self) -> int:
        return int(self._index.d)

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def vectors(self) -> np.ndarray:
        """Every stored vector, in ``member_ids()`` order (exact indexes only)."""
        if self.kind != "flat":
            raise ValueError("only an exact index keeps its vectors in order")
        return (
            self._index.index.reconstruct_n(0, len(self))
            if len(self)
            else np.zeros((0, self.dim), np.float32)
        )

    def vectors_of(self, member_ids: np.ndarray) -> np.ndarray:
        """The stored vectors of these members; an IVF index builds its id map the first time,
        and the members' positions are looked up in a sorted copy kept until the next change
        (building a dict of every member each call cost a 1M-member index 0.2 s a query)."""
        inner = faiss.downcast_index(self._index.index)
        if isinstance(inner, faiss.IndexIVF) and not inner.direct_map.type:
            inner.make_direct_map()
        if self._positions is None:
            ids = self.member_ids()
            order = np.argsort(ids, kind="stable")
            self._positions = (ids[order], order)
        sorted_ids, order = self._positions
        member_ids = np.asarray(member_ids, dtype=np.int64)
        found = np.searchsorted(sorted_ids, member_ids)
        if len(member_ids) and (
            found.max() >= len(sorted_ids) or (sorted_ids[found] != member_ids).any()
        ):
            raise KeyError("some of these member ids are not in the index")
        if not len(member_ids):
            return np.zeros((0, self.dim), np.float32)
        return np.stack([inner.reconstruct(int(order[i])) for i in found])

    def member_ids(self) -> np.ndarray:
        """Every member id the index holds, in insertion order."""
        return faiss.vector_to_array(self._index.id_map).astype(np.int64)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(scores, member_ids)``, each ``(Q, k)``; missing neighbours have id -1."""
        queries = _as_matrix(queries)
        if queries.shape[1] != self.dim:
            raise ValueError(f"queries have dim {queries.shape[1]}, the index has {self.dim}")
        if len(self) == 0:
            return (
                np.full((len(queries), k), -np.inf, np.float32),
                np.full((len(queries), k), -1, np.int64),
            )
        return self._index.search(queries, k)

    def save(self, folder: Path, *, extra: dict | None = None) -> None:
        faiss.write_index(self._index, str(Path(folder) / _INDEX_FILE))
        manifest = {
            "artifact": INDEX_ARTIFACT,
            "dim": self.dim,
            "size": len(self),
            "kind": self.kind,
            "nprobe": self.nprobe,
        }
        write_manifest(folder, {**manifest, **(extra or {})})

    @classmethod
    def load(cls, folder: Path, *, mapped: bool = False) -> MemberIndex:
        """The index saved in ``folder``. ``mapped``: its vectors (an exact index's, or an IVF
        index's lists) are read from the memory-mapped file instead of copied into this
        process, so every process serving it shares one copy; such an index is read-only
        (``add`` and ``remove`` are refused)."""
        manifest = read_manifest(folder, kind=INDEX_ARTIFACT)
        path = Path(folder) / _INDEX_FILE
        if not path.is_file():
            raise ArtifactError(f"{path} is missing")
        flags = faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY if mapped else 0
        try:
            index = faiss.read_index(str(path), flags)
        except RuntimeError as exc:
            detail = str(exc).rsplit("Error: ", 1)[-1].strip()  # past FAISS's C++ signature
            raise ArtifactError(f"{path} is truncated or corrupt ({detail})") from None
        if not isinstance(index, faiss.IndexIDMap2):
            index = faiss.downcast_index(index)
        if index.ntotal != manifest.get("size") or index.d != manifest.get("dim"):
            raise ArtifactError(f"index file in {folder} does not match its manifest")
        loaded = cls(index)
        loaded.mapped = mapped
        if manifest.get("nprobe"):
            loaded.set_nprobe(manifest["nprobe"])
        return loaded


def _as_matrix(vectors: np.ndarray) -> np.ndarray:
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2:
        raise ValueError(f"expected a 2-d array of vectors, got shape {vectors.shape}")
    return vectors
