"""The member index: FAISS inner product over L2-normalised vectors, keyed by member id."""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np

from models_app.siamese.artifacts import ArtifactError, read_manifest, write_manifest

INDEX_ARTIFACT = "member-index"
_INDEX_FILE = "members.faiss"


class MemberIndex:
    """Exact cosine search over member vectors; FAISS ids are the database ids of members."""

    def __init__(self, index: faiss.IndexIDMap2) -> None:
        self._index = index

    @classmethod
    def build(cls, vectors: np.ndarray, member_ids: np.ndarray) -> MemberIndex:
        vectors = _as_matrix(vectors)
        member_ids = np.ascontiguousarray(member_ids, dtype=np.int64)
        if len(member_ids) != len(vectors):
            raise ValueError(f"{len(vectors)} vectors but {len(member_ids)} ids")
        if len(np.unique(member_ids)) != len(member_ids):
            raise ValueError("member ids must be unique")
        index = faiss.IndexIDMap2(faiss.IndexFlatIP(vectors.shape[1]))
        if len(vectors):
            index.add_with_ids(vectors, member_ids)
        return cls(index)

    @property
    def dim(self) -> int:
        return int(self._index.d)

    def __len__(self) -> int:
        return int(self._index.ntotal)

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
        write_manifest(
            folder,
            {"artifact": INDEX_ARTIFACT, "dim": self.dim, "size": len(self), **(extra or {})},
        )

    @classmethod
    def load(cls, folder: Path) -> MemberIndex:
        manifest = read_manifest(folder, kind=INDEX_ARTIFACT)
        try:
            index = faiss.read_index(str(Path(folder) / _INDEX_FILE))
        except RuntimeError as exc:
            raise ArtifactError(f"index file in {folder} is corrupt: {exc}") from None
        if not isinstance(index, faiss.IndexIDMap2):
            index = faiss.downcast_index(index)
        if index.ntotal != manifest.get("size") or index.d != manifest.get("dim"):
            raise ArtifactError(f"index file in {folder} does not match its manifest")
        return cls(index)


def _as_matrix(vectors: np.ndarray) -> np.ndarray:
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2:
        raise ValueError(f"expected a 2-d array of vectors, got shape {vectors.shape}")
    return vectors
