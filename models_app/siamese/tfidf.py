"""The TF-IDF encoder of character n-grams: fitted, not trained (an LSA projection of the
members' n-gram weights); the S2Net encoder starts from it."""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch

from models_app.siamese.artifacts import ArtifactError, write_manifest
from models_app.siamese.configs import ENCODER_ARTIFACT, ConfigError, check_field_types
from models_app.siamese.text import char_ngram_strings


@dataclass(frozen=True)
class CharNgramConfig:
    """TF-IDF over character n-grams, projected by truncated SVD (latent semantic analysis).

    The projection keeps the vectors dense and small enough for an exact FAISS index over tens of
    thousands of members, at a small cost in accuracy against the raw sparse vectors.
    """

    kind: str = "char_ngram_tfidf"
    ngram_min: int = 2
    ngram_max: int = 4
    dim: int = 256
    min_df: int = 2
    svd_iterations: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.kind != "char_ngram_tfidf":
            raise ConfigError(f"kind {self.kind!r} is not a char_ngram_tfidf config")
        if not 1 <= self.ngram_min <= self.ngram_max <= 8:
            raise ConfigError("need 1 <= ngram_min <= ngram_max <= 8")
        if not 2 <= self.dim <= 4096:
            raise ConfigError(f"dim must be between 2 and 4096, got {self.dim}")
        if self.min_df < 1:
            raise ConfigError(f"min_df must be at least 1, got {self.min_df}")
        if self.svd_iterations < 0:
            raise ConfigError("svd_iterations must not be negative")


def char_ngrams(text: str, ngram_min: int, ngram_max: int) -> Counter[str]:
    """Character n-grams of the normalized text, counted (in order of first occurrence)."""
    return Counter(char_ngram_strings(text, ngram_min, ngram_max))


class CharNgramTfidfEncoder:
    kind: ClassVar[str] = "char_ngram_tfidf"

    def __init__(
        self,
        config: CharNgramConfig,
        vocabulary: list[str],
        idf: np.ndarray,
        projection: np.ndarray,
    ) -> None:
        if projection.shape != (len(vocabulary), projection.shape[1]) or idf.shape != (
            len(vocabulary),
        ):
            raise ArtifactError("vocabulary, idf and projection sizes disagree")
        self.config = config
        self.vocabulary = vocabulary
        self._column = {gram: i for i, gram in enumerate(vocabulary)}
        self.idf = idf.astype(np.float32)
        # No copy of a float32 projection: a memory-mapped one stays mapped.
        self.projection = torch.from_numpy(np.asarray(projection, dtype=np.float32))  # (V, D)

    @property
    def dim(self) -> int:
        return int(self.projection.shape[1])

    # -- fitting ----------------------------------------------------------------------------------
    @classmethod
    def fit(cls, texts: Sequence[str], config: CharNgramConfig) -> CharNgramTfidfEncoder:
        if not texts:
            raise ConfigError("cannot fit an encoder on an empty taxonomy")
        counts = [char_ngrams(t, config.ngram_min, config.ngram_max) for t in texts]
        document_frequency: Counter[str] = Counter()
        for grams in counts:
            document_frequency.update(grams.keys())
        vocabulary = sorted(g for g, df in document_frequency.items() if df >= config.min_df)
        if len(vocabulary) < 2:
            raise ConfigError("too few character n-grams to fit on; add more member strings")
        n_docs = len(texts)
        idf = np.array(
            [np.log((1 + n_docs) / (1 + document_frequency[g])) + 1.0 for g in vocabulary],
            dtype=np.float32,
        )
        unprojected = cls(config, vocabulary, idf, np.zeros((len(vocabulary), 1), np.float32))
        tfidf = unprojected._tfidf_matrix(counts)  # (N, V) sparse, rows L2-normalised
        rank = min(config.dim, len(vocabulary), n_docs)
        generator_state = torch.random.get_rng_state()
        torch.manual_seed(config.seed)
        try:
            _, _, right = torch.svd_lowrank(
                tfidf.to_sparse_coo(), q=rank, niter=config.svd_iterations
            )  # right: (V, rank)
        finally:
            torch.random.set_rng_state(generator_state)
        projection = np.zeros((len(vocabulary), config.dim), dtype=np.float32)
        projection[:, :rank] = right.numpy()
        return cls(config, vocabulary, idf, projection)

    # -- encoding ---------------------------------------------------------------------------------
    def _tfidf_matrix(self, counts: Sequence[Counter[str]]) -> torch.Tensor:
        row_pointers = [0]
        columns: list[int] = []
        values: list[float] = []
        for grams in counts:
            for gram, count in grams.items():
                column = self._column.get(gram)
                if column is not None:
                    columns.append(column)
                    values.append((1.0 + np.log(count)) * self.idf[column])
            row_pointers.append(len(columns))
        crow = torch.tensor(row_pointers, dtype=torch.int64)
        col = torch.tensor(columns, dtype=torch.int64)
        val = torch.tensor(values, dtype=torch.float32)
        if len(values):
            row_of_value = torch.repeat_interleave(torch.arange(len(counts)), crow[1:] - crow[:-1])
            norms = torch.zeros(len(counts)).index_add_(0, row_of_value, val * val).sqrt()
            val = val / norms[row_of_value].clamp_min(1e-12)
        with warnings.catch_warnings():
            # torch flags its CSR support as beta; the two operations used here are stable.
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            return torch.sparse_csr_tensor(
                crow, col, val, size=(len(counts), len(self.vocabulary)), check_invariants=False
            )

    def encode(self, texts: Sequence[str], batch_size: int = 4096) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                batch = texts[start : start + batch_size]
                counts = [
                    char_ngrams(t, self.config.ngram_min, self.config.ngram_max) for t in batch
                ]
                vectors = self._tfidf_matrix(counts) @ self.projection  # (B, D)
                vectors = torch.nn.functional.normalize(vectors, dim=1)
                out[start : start + len(batch)] = vectors.numpy()
        return out

    # -- persistence ------------------------------------------------------------------------------
    def save(self, folder: Path) -> None:
        folder = Path(folder)
        (folder / "vocabulary.json").write_text(json.dumps(self.vocabulary, ensure_ascii=False))
        np.save(folder / "idf.npy", self.idf)
        np.save(folder / "projection.npy", self.projection.numpy())
        write_manifest(
            folder,
            {"artifact": ENCODER_ARTIFACT, "config": dataclasses.asdict(self.config)},
        )

    @classmethod
    def load(
        cls, folder: Path, config: CharNgramConfig, *, mapped: bool = False
    ) -> CharNgramTfidfEncoder:
        """``mapped``: the projection, its one big array, is read from its memory-mapped file
        (copy-on-write) instead of copied into this process."""
        folder = Path(folder)
        try:
            vocabulary = json.loads((folder / "vocabulary.json").read_text())
            idf = np.load(folder / "idf.npy", allow_pickle=False)
            projection = np.load(
                folder / "projection.npy", mmap_mode="c" if mapped else None, allow_pickle=False
            )
        except (OSError, ValueError) as exc:
            raise ArtifactError(f"encoder files in {folder} are unreadable: {exc}") from None
        return cls(config, vocabulary, idf, projection)
