"""A fastText-style hashed bag of words and character n-grams, with its config and the n-gram
ids it is fed."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from models_app.siamese.configs import check_field_types
from models_app.siamese.networks.base import WORD, NeuralEncoder, require, stable_hash
from models_app.siamese.text import char_ngram_strings, comparison_key


@dataclass(frozen=True)
class NgramBagConfig:
    """fastText-style: mean of hashed embeddings of words and character n-grams, tanh, linear."""

    kind: str = "ngram_bag"
    buckets: int = 2**18
    embedding_dim: int = 128
    output_dim: int = 128
    ngram_min: int = 3
    ngram_max: int = 5
    words: bool = True
    dropout: float = 0.1
    # "none" with no bias keeps the encoder linear in the bag: n-grams no training string had
    # (zero rows) then change the vector's length only, not its direction, so unseen noise words
    # and typo n-grams are ignored by cosine search. "tanh" is fastText-like.
    activation: str = "none"
    bias: bool = False

    def __post_init__(self) -> None:
        check_field_types(self)
        require(self.activation in {"none", "tanh"}, "activation must be 'none' or 'tanh'")
        require(2**8 <= self.buckets <= 2**24, "buckets must be between 2^8 and 2^24")
        require(2 <= self.embedding_dim <= 2048, "embedding_dim must be between 2 and 2048")
        require(2 <= self.output_dim <= 4096, "output_dim must be between 2 and 4096")
        require(1 <= self.ngram_min <= self.ngram_max <= 8, "need 1 <= ngram_min <= ngram_max <= 8")
        require(0 <= self.dropout < 1, "dropout must be in [0, 1)")


def ngram_bag_ids(text: str, config: NgramBagConfig) -> np.ndarray:
    """The bucket of each distinct character n-gram of ``text`` (in order of first
    occurrence), then of each word, or ``[0]`` for a text with neither; read-only int32."""
    key = comparison_key(text)
    # dict.fromkeys: the distinct n-grams, as ``char_ngrams`` lists them, without counting them
    tokens = list(dict.fromkeys(char_ngram_strings(key, config.ngram_min, config.ngram_max)))
    if config.words:
        tokens.extend(f"w:{word}" for word in WORD.findall(key))
    ids = np.fromiter(
        (stable_hash(token) % config.buckets for token in tokens), np.int32, len(tokens)
    )
    if not len(ids):
        ids = np.zeros(1, np.int32)
    ids.flags.writeable = False  # may be shared through the training cache below
    return ids


# While training, the ids of the texts featurized last are kept (keyed by text and config;
# least recently used dropped first): every step draws its positives among the member strings
# again, and hashing n-grams in Python is a large share of a fine-tune's time
# (docs/decisions/performance-choices.md). Bounded by the count below; freed when training ends
# (``after_training``). Inference does not keep them: a web process would fill the cache with
# queries it sees once.
NGRAM_IDS_KEPT_WHILE_TRAINING = 2**17
training_ngram_bag_ids = functools.lru_cache(maxsize=NGRAM_IDS_KEPT_WHILE_TRAINING)(ngram_bag_ids)


class NgramBagEncoder(NeuralEncoder):
    """The bucket table takes sparse gradients: a step updates only the rows of the n-grams in
    the batch (fast with a sparse optimizer). When training ends, rows that no member string
    uses are zeroed (``after_training``): those were reached only by augmentation noise, an
    n-gram outside the taxonomy then adds nothing (the linear encoder ignores it), and only the
    kept rows are written to disk. Measured on O*NET: accuracy unchanged, a third of the rows."""

    kind = "ngram_bag"

    def __init__(self, config: NgramBagConfig, *, initialize: bool = True) -> None:
        super().__init__()
        self.config = config
        # A table loaded from disk is filled in place (``state_from_disk``): filling it at
        # random first would write its 268 MB (O*NET's student) for nothing.
        table = None if initialize else torch.empty(config.buckets, config.embedding_dim)
        self.bag = nn.EmbeddingBag(
            config.buckets, config.embedding_dim, mode="mean", sparse=True, _weight=table
        )
        if initialize:
            nn.init.normal_(self.bag.weight, std=0.1)
        self.dropout = nn.Dropout(config.dropout)
        self.dense = nn.Linear(config.embedding_dim, config.output_dim, bias=config.bias)

    def state_for_disk(self):
        """Reached rows only, each as int8 with its own scale: a quarter of float32's size."""
        state = dict(self.state_dict())
        table = state.pop("bag.weight")
        rows = table.abs().sum(dim=1).nonzero().squeeze(1)  # (R,)
        values = table[rows]  # (R, E)
        scale = values.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / 127.0  # (R, 1)
        quantized = torch.round(values / scale).to(torch.int8)  # (R, E)
        return {**state, "bag.rows": rows, "bag.int8": quantized, "bag.scale": scale}

    @classmethod
    def for_loading(cls, config: NgramBagConfig, vocabulary) -> NgramBagEncoder:
        return cls(config, initialize=False)

    def state_from_disk(self, state):
        state = dict(state)
        # The module's own table, filled in place: a load holds one table, not two.
        table = self.bag.weight.detach()
        table.zero_()
        rows = state.pop("bag.rows")
        if "bag.int8" in state:
            table[rows] = state.pop("bag.int8").float().mul_(state.pop("bag.scale").float())
        else:  # float16 rows, as written before int8 storage
            table[rows] = state.pop("bag.values")
        return {**state, "bag.weight": table}

    def featurize(self, texts, *, train=False, rng=None):
        ids_of = training_ngram_bag_ids if train else ngram_bag_ids
        ids = [ids_of(text, self.config) for text in texts]
        offsets = np.cumsum([0] + [len(row) for row in ids[:-1]], dtype=np.int64)
        flat = np.concatenate(ids) if ids else np.zeros(0, np.int32)
        return {
            "ids": torch.from_numpy(flat.astype(np.int64)),
            "offsets": torch.from_numpy(offsets),
        }

    def after_training(self, texts: Sequence[str]) -> None:
        used = torch.zeros(self.config.buckets, dtype=torch.bool)
        if texts:
            rows = np.unique(np.concatenate([ngram_bag_ids(text, self.config) for text in texts]))
            used[torch.from_numpy(rows.astype(np.int64))] = True
        with torch.no_grad():
            self.bag.weight[~used.to(self.bag.weight.device)] = 0.0
        training_ngram_bag_ids.cache_clear()  # training is over: the kept ids are not needed

    def forward(self, features):
        bag = self.bag(features["ids"], features["offsets"])  # (B, E)
        if self.config.activation == "tanh":
            bag = torch.tanh(bag)
        return self.dense(self.dropout(bag))  # (B, D)
