"""A hashed-word CNN (Bonadiman et al.) and its config."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch
from torch import nn

from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.configs import check_field_types
from models_app.siamese.networks.base import WORD, NeuralEncoder, require, stable_hash
from models_app.siamese.text import comparison_key


@dataclass(frozen=True)
class ConvWordsConfig:
    """Words embedded through a vocabulary of frequent words plus hashed buckets for rare ones
    (the hashing trick), one convolution, max-pooling over time, a dense layer."""

    kind: str = "conv_words"
    min_count: int = 2
    hash_buckets: int = 2**14
    embedding_dim: int = 128
    filters: int = 256
    width: int = 3
    output_dim: int = 128
    max_words: int = 24
    dropout: float = 0.1

    def __post_init__(self) -> None:
        check_field_types(self)
        require(self.min_count >= 1, "min_count must be at least 1")
        require(2**4 <= self.hash_buckets <= 2**22, "hash_buckets must be between 2^4 and 2^22")
        require(2 <= self.embedding_dim <= 2048, "embedding_dim must be between 2 and 2048")
        require(2 <= self.filters <= 4096, "filters must be between 2 and 4096")
        require(1 <= self.width <= 9, "width must be between 1 and 9")
        require(2 <= self.output_dim <= 4096, "output_dim must be between 2 and 4096")
        require(1 <= self.max_words <= 200, "max_words must be between 1 and 200")
        require(0 <= self.dropout < 1, "dropout must be in [0, 1)")


class ConvWordsEncoder(NeuralEncoder):
    kind = "conv_words"

    def __init__(self, config: ConvWordsConfig, vocabulary: list[str]) -> None:
        super().__init__()
        self.config = config
        self.vocabulary = vocabulary
        self._word_id = {word: i + 1 for i, word in enumerate(vocabulary)}  # 0 is padding
        self.words = nn.Embedding(
            1 + len(vocabulary) + config.hash_buckets, config.embedding_dim, padding_idx=0
        )
        self.conv = nn.Conv1d(
            config.embedding_dim, config.filters, config.width, padding=config.width // 2
        )
        self.dropout = nn.Dropout(config.dropout)
        self.dense = nn.Linear(config.filters, config.output_dim)

    @classmethod
    def create(cls, texts, config):
        counts = Counter(word for text in texts for word in WORD.findall(comparison_key(text)))
        return cls(config, sorted(w for w, n in counts.items() if n >= config.min_count))

    @classmethod
    def from_vocabulary(cls, config, vocabulary):
        if not isinstance(vocabulary, list):
            raise ArtifactError("conv_words needs its word vocabulary")
        return cls(config, vocabulary)

    def vocabulary_state(self):
        return self.vocabulary

    def _word(self, word: str) -> int:
        known = self._word_id.get(word)
        if known is not None:
            return known
        return 1 + len(self.vocabulary) + stable_hash(word) % self.config.hash_buckets

    def featurize(self, texts, *, train=False, rng=None):
        rows = [
            [self._word(w) for w in WORD.findall(comparison_key(t))][: self.config.max_words] or [0]
            for t in texts
        ]
        width = max(max(len(row) for row in rows), self.config.width)
        ids = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row)
        return {"ids": ids}

    def forward(self, features):
        ids = features["ids"]  # (B, T)
        embedded = self.words(ids).transpose(1, 2)  # (B, E, T)
        convolved = torch.relu(self.conv(embedded))  # (B, F, T)
        convolved = convolved.masked_fill((ids == 0).unsqueeze(1), float("-inf"))
        pooled = convolved.amax(dim=2)  # (B, F)
        pooled = torch.where(torch.isinf(pooled), torch.zeros_like(pooled), pooled)
        return self.dense(self.dropout(pooled))  # (B, D)
