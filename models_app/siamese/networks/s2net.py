"""S2Net (Yih et al.): a learned linear projection of TF-IDF vectors, and its config."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.configs import check_field_types
from models_app.siamese.networks.base import NeuralEncoder, require
from models_app.siamese.tfidf import CharNgramConfig, CharNgramTfidfEncoder, char_ngrams


@dataclass(frozen=True)
class S2NetConfig:
    kind: str = "s2net"
    ngram_min: int = 2
    ngram_max: int = 4
    min_df: int = 2
    output_dim: int = 256

    def __post_init__(self) -> None:
        check_field_types(self)
        require(1 <= self.ngram_min <= self.ngram_max <= 8, "need 1 <= ngram_min <= ngram_max <= 8")
        require(self.min_df >= 1, "min_df must be at least 1")
        require(2 <= self.output_dim <= 4096, "output_dim must be between 2 and 4096")


def _tfidf_config(config: S2NetConfig) -> CharNgramConfig:
    """The TF-IDF vectoriser (and SVD initialisation) an S2Net config implies."""
    return CharNgramConfig(
        ngram_min=config.ngram_min,
        ngram_max=config.ngram_max,
        dim=config.output_dim,
        min_df=config.min_df,
    )


class S2NetEncoder(NeuralEncoder):
    """The projection starts from the truncated SVD of the TF-IDF matrix (the paper initialises
    from PCA) and is then trained with the pairwise logistic loss."""

    kind = "s2net"

    def __init__(self, config: S2NetConfig, tfidf: CharNgramTfidfEncoder) -> None:
        super().__init__()
        self.config = config
        self.tfidf = tfidf
        self.projection = nn.Parameter(tfidf.projection.clone())  # (V, D)

    @classmethod
    def create(cls, texts, config):
        return cls(config, CharNgramTfidfEncoder.fit(texts, _tfidf_config(config)))

    @classmethod
    def from_vocabulary(cls, config, vocabulary):
        if not isinstance(vocabulary, dict):
            raise ArtifactError("s2net needs its n-gram vocabulary and idf")
        idf = np.asarray(vocabulary["idf"], dtype=np.float32)
        projection = np.zeros((len(idf), config.output_dim), dtype=np.float32)
        tfidf = CharNgramTfidfEncoder(_tfidf_config(config), vocabulary["ngrams"], idf, projection)
        return cls(config, tfidf)

    def vocabulary_state(self):
        return {"ngrams": self.tfidf.vocabulary, "idf": self.tfidf.idf.tolist()}

    def featurize(self, texts, *, train=False, rng=None):
        counts = [char_ngrams(t, self.config.ngram_min, self.config.ngram_max) for t in texts]
        matrix = self.tfidf._tfidf_matrix(counts).to_sparse_coo().coalesce()
        return {
            "indices": matrix.indices(),
            "values": matrix.values(),
            "rows": torch.tensor(len(texts)),
        }

    def forward(self, features):
        rows = int(features["rows"])
        matrix = torch.sparse_coo_tensor(
            features["indices"],
            features["values"],
            (rows, self.projection.shape[0]),
            check_invariants=False,
        )
        return torch.sparse.mm(matrix, self.projection)  # (B, D)
