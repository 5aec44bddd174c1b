"""Trainable encoders: the paper's character BiLSTM, a hashed n-gram bag, a hashed-word CNN and
S2Net's linear projection of TF-IDF vectors.

Each is an ``nn.Module`` configured by a frozen dataclass. ``featurize`` turns texts into input
tensors (with the training-time randomness of the paper where it has any), ``forward`` returns
raw embeddings ``(B, D)``, and ``encode`` gives the L2-normalised numpy vectors that the index
and every matcher use.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import random
import re
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from models_app.siamese.artifacts import ArtifactError, write_manifest
from models_app.siamese.encoders import (
    ENCODER_ARTIFACT,
    CharNgramConfig,
    CharNgramTfidfEncoder,
    ConfigError,
    char_ngram_strings,
    char_ngrams,
    check_field_types,
)
from models_app.siamese.text import normalize_text

_WORD = re.compile(r"\w+", re.UNICODE)
_WEIGHTS = "weights.pt"
_VOCABULARY = "vocabulary.json"


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


def stable_hash(token: str) -> int:
    """A hash that is the same in every process (Python's ``hash`` is salted per process)."""
    return zlib.crc32(token.encode("utf-8"))


class NeuralEncoder(nn.Module):
    kind: ClassVar[str]
    config: Any

    # -- to implement ------------------------------------------------------------------------------
    def featurize(
        self, texts: Sequence[str], *, train: bool = False, rng: random.Random | None = None
    ) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def vocabulary_state(self) -> Any:
        """Whatever besides the weights is needed to rebuild the module (JSON-serialisable)."""
        return None

    def after_training(self, texts: Sequence[str]) -> None:
        """Called once on the best weights when training ends, with every member string."""

    def state_for_disk(self) -> dict[str, torch.Tensor]:
        return self.state_dict()

    def state_from_disk(self, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return state

    # -- shared ------------------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return self.config.output_dim

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def embed(self, texts: Sequence[str], *, train: bool, rng=None) -> torch.Tensor:
        features = self.featurize(texts, train=train, rng=rng)
        return self({name: tensor.to(self.device) for name, tensor in features.items()})

    def encode(self, texts: Sequence[str], batch_size: int = 1024) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        # Similar lengths together: less padding for the recurrent encoder, harmless elsewhere.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        was_training = self.training
        self.eval()
        try:
            with torch.inference_mode():
                for start in range(0, len(order), batch_size):
                    rows = order[start : start + batch_size]
                    vectors = self.embed([texts[i] for i in rows], train=False)
                    vectors = nn.functional.normalize(vectors.float(), dim=1)
                    out[rows] = vectors.cpu().numpy()
        finally:
            self.train(was_training)
        return out

    def save(self, folder: Path) -> None:
        """Weights are stored as float16: half the size on disk (the shipped model is committed),
        no measurable change in search results; training checkpoints keep float32."""
        folder = Path(folder)
        state = {
            name: tensor.detach().cpu().half() if tensor.is_floating_point() else tensor.cpu()
            for name, tensor in self.state_for_disk().items()
        }
        torch.save(state, folder / _WEIGHTS)
        (folder / _VOCABULARY).write_text(json.dumps(self.vocabulary_state(), ensure_ascii=False))
        write_manifest(
            folder, {"artifact": ENCODER_ARTIFACT, "config": dataclasses.asdict(self.config)}
        )

    @classmethod
    def load(cls, folder: Path, config: Any) -> NeuralEncoder:
        folder = Path(folder)
        try:
            vocabulary = json.loads((folder / _VOCABULARY).read_text())
            state = torch.load(folder / _WEIGHTS, map_location="cpu", weights_only=True)
        except (OSError, ValueError, RuntimeError) as exc:
            raise ArtifactError(f"encoder files in {folder} are unreadable: {exc}") from None
        module = cls.from_vocabulary(config, vocabulary)
        try:
            state = {
                name: tensor.float() if tensor.is_floating_point() else tensor
                for name, tensor in state.items()
            }
            module.load_state_dict(module.state_from_disk(state))
        except (RuntimeError, KeyError, IndexError) as exc:
            raise ArtifactError(f"weights in {folder} do not fit the config: {exc}") from None
        module.eval()
        return module

    @classmethod
    def create(cls, texts: Sequence[str], config: Any) -> NeuralEncoder:
        """An untrained module whose vocabulary (if any) comes from ``texts``."""
        return cls.from_vocabulary(config, None)

    @classmethod
    def from_vocabulary(cls, config: Any, vocabulary: Any) -> NeuralEncoder:
        return cls(config)


# -- the paper's character BiLSTM ------------------------------------------------------------------
@dataclass(frozen=True)
class CharBiLSTMConfig:
    kind: str = "char_bilstm"
    layers: int = 4
    hidden: int = 64  # per direction
    char_embedding: int = 32
    output_dim: int = 128
    max_length: int = 100
    recurrent_dropout: float = 0.2
    layer_dropout: float = 0.4
    random_placement: bool = True

    def __post_init__(self) -> None:
        check_field_types(self)
        _check(1 <= self.layers <= 8, "layers must be between 1 and 8")
        _check(4 <= self.hidden <= 1024, "hidden must be between 4 and 1024")
        _check(2 <= self.char_embedding <= 512, "char_embedding must be between 2 and 512")
        _check(2 <= self.output_dim <= 4096, "output_dim must be between 2 and 4096")
        _check(8 <= self.max_length <= 1000, "max_length must be between 8 and 1000")
        _check(0 <= self.recurrent_dropout < 1, "recurrent_dropout must be in [0, 1)")
        _check(0 <= self.layer_dropout < 1, "layer_dropout must be in [0, 1)")


_CHAR_VOCABULARY = 258  # 0 padding, 1..256 code points below 256, 257 any other character


def char_ids(text: str, max_length: int) -> list[int]:
    return [min(ord(ch), 256) + 1 for ch in normalize_text(text)[:max_length]] or [
        _CHAR_VOCABULARY - 1
    ]


class CharBiLSTMEncoder(NeuralEncoder):
    """Neculoiu et al. (2016): 4 stacked BiLSTM layers of 64 units a direction, the last layer's
    outputs averaged over time, then one dense layer.

    Dropout: torch's LSTM has no dropout on the recurrent connections, so the paper's 0.2 on
    the recurrent units is applied as dropout on the character embeddings fed to the first layer
    (the same mask shape for every time step would be variational dropout; plain dropout is used
    here), and 0.4 between the stacked layers as the paper says.

    Training places each string at a random offset inside a ``max_length`` sequence of padding, as
    the paper does; the mean runs over the string's own time steps only, so at inference the
    string is packed at offset 0 with no padding cost and the same averaging.
    """

    kind = "char_bilstm"

    def __init__(self, config: CharBiLSTMConfig) -> None:
        super().__init__()
        self.config = config
        self.characters = nn.Embedding(_CHAR_VOCABULARY, config.char_embedding, padding_idx=0)
        self.input_dropout = nn.Dropout(config.recurrent_dropout)
        self.lstm = nn.LSTM(
            config.char_embedding,
            config.hidden,
            num_layers=config.layers,
            bidirectional=True,
            batch_first=True,
            dropout=config.layer_dropout if config.layers > 1 else 0.0,
        )
        self.dense = nn.Linear(2 * config.hidden, config.output_dim)

    def featurize(self, texts, *, train=False, rng=None):
        rng = rng or random.Random(0)
        limit = self.config.max_length
        sequences = [char_ids(text, limit) for text in texts]
        lengths = [len(ids) for ids in sequences]
        if train and self.config.random_placement:
            offsets = [rng.randint(0, limit - n) for n in lengths]
            width = limit
        else:
            offsets = [0] * len(sequences)
            width = max(lengths)
        ids = torch.zeros((len(sequences), width), dtype=torch.long)
        mask = torch.zeros((len(sequences), width), dtype=torch.bool)
        for row, (sequence, offset) in enumerate(zip(sequences, offsets, strict=True)):
            ids[row, offset : offset + len(sequence)] = torch.tensor(sequence)
            mask[row, offset : offset + len(sequence)] = True
        return {
            "ids": ids,
            "mask": mask,
            "lengths": torch.tensor(lengths),
            "packed": torch.tensor(not train),
        }

    def forward(self, features):
        ids, mask = features["ids"], features["mask"]  # (B, T) each
        embedded = self.input_dropout(self.characters(ids))  # (B, T, E)
        if bool(features["packed"]):
            lengths = features["lengths"].cpu()
            packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
            outputs, _ = self.lstm(packed)
            outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=ids.shape[1])
        else:
            outputs, _ = self.lstm(embedded)  # (B, T, 2H)
        weights = mask.unsqueeze(-1).to(outputs.dtype)  # (B, T, 1)
        mean = (outputs * weights).sum(1) / weights.sum(1).clamp_min(1.0)  # (B, 2H)
        return self.dense(mean)  # (B, D)


# -- hashed bag of words and character n-grams -----------------------------------------------------
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
        _check(self.activation in {"none", "tanh"}, "activation must be 'none' or 'tanh'")
        _check(2**8 <= self.buckets <= 2**24, "buckets must be between 2^8 and 2^24")
        _check(2 <= self.embedding_dim <= 2048, "embedding_dim must be between 2 and 2048")
        _check(2 <= self.output_dim <= 4096, "output_dim must be between 2 and 4096")
        _check(1 <= self.ngram_min <= self.ngram_max <= 8, "need 1 <= ngram_min <= ngram_max <= 8")
        _check(0 <= self.dropout < 1, "dropout must be in [0, 1)")


def ngram_bag_ids(text: str, config: NgramBagConfig) -> np.ndarray:
    """The bucket of each distinct character n-gram of ``text`` (in order of first
    occurrence), then of each word, or ``[0]`` for a text with neither; read-only int32."""
    key = normalize_text(text)
    # dict.fromkeys: the distinct n-grams, as ``char_ngrams`` lists them, without counting them
    tokens = list(dict.fromkeys(char_ngram_strings(key, config.ngram_min, config.ngram_max)))
    if config.words:
        tokens.extend(f"w:{word}" for word in _WORD.findall(key))
    ids = np.fromiter(
        (stable_hash(token) % config.buckets for token in tokens), np.int32, len(tokens)
    )
    if not len(ids):
        ids = np.zeros(1, np.int32)
    ids.flags.writeable = False  # may be shared through the training cache below
    return ids


# While training, the ids of the texts featurized last are kept (keyed by text and config;
# least recently used dropped first): every step draws its positives among the member strings
# again, and hashing n-grams in Python was a third of a fine-tune's time (docs/benchmarks.md,
# "Fine-tune throughput"). About 600 B a text, some 80 MB full; freed when training ends
# (``after_training``). Inference does not keep them: a web process would fill the cache with
# queries it sees once.
NGRAM_IDS_KEPT_WHILE_TRAINING = 2**17
_training_ngram_bag_ids = functools.lru_cache(maxsize=NGRAM_IDS_KEPT_WHILE_TRAINING)(ngram_bag_ids)


class NgramBagEncoder(NeuralEncoder):
    """The bucket table takes sparse gradients: a step updates only the rows of the n-grams in
    the batch (fast with a sparse optimizer). When training ends, rows that no member string
    uses are zeroed (``after_training``): those were reached only by augmentation noise, an
    n-gram outside the taxonomy then adds nothing (the linear encoder ignores it), and only the
    kept rows are written to disk. Measured on O*NET: accuracy unchanged, a third of the rows."""

    kind = "ngram_bag"

    def __init__(self, config: NgramBagConfig) -> None:
        super().__init__()
        self.config = config
        self.bag = nn.EmbeddingBag(config.buckets, config.embedding_dim, mode="mean", sparse=True)
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

    def state_from_disk(self, state):
        state = dict(state)
        table = torch.zeros(self.config.buckets, self.config.embedding_dim)
        rows = state.pop("bag.rows")
        if "bag.int8" in state:
            table[rows] = state.pop("bag.int8").float() * state.pop("bag.scale").float()
        else:  # float16 rows, as written before int8 storage
            table[rows] = state.pop("bag.values")
        return {**state, "bag.weight": table}

    def featurize(self, texts, *, train=False, rng=None):
        ids_of = _training_ngram_bag_ids if train else ngram_bag_ids
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
        _training_ngram_bag_ids.cache_clear()  # training is over: the kept ids are not needed

    def forward(self, features):
        bag = self.bag(features["ids"], features["offsets"])  # (B, E)
        if self.config.activation == "tanh":
            bag = torch.tanh(bag)
        return self.dense(self.dropout(bag))  # (B, D)


# -- hashed-word CNN (Bonadiman et al.) ------------------------------------------------------------
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
        _check(self.min_count >= 1, "min_count must be at least 1")
        _check(2**4 <= self.hash_buckets <= 2**22, "hash_buckets must be between 2^4 and 2^22")
        _check(2 <= self.embedding_dim <= 2048, "embedding_dim must be between 2 and 2048")
        _check(2 <= self.filters <= 4096, "filters must be between 2 and 4096")
        _check(1 <= self.width <= 9, "width must be between 1 and 9")
        _check(2 <= self.output_dim <= 4096, "output_dim must be between 2 and 4096")
        _check(1 <= self.max_words <= 200, "max_words must be between 1 and 200")
        _check(0 <= self.dropout < 1, "dropout must be in [0, 1)")


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
        counts = Counter(word for text in texts for word in _WORD.findall(normalize_text(text)))
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
            [self._word(w) for w in _WORD.findall(normalize_text(t))][: self.config.max_words]
            or [0]
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


# -- S2Net (Yih et al.): a learned linear projection of TF-IDF vectors ----------------------------
@dataclass(frozen=True)
class S2NetConfig:
    kind: str = "s2net"
    ngram_min: int = 2
    ngram_max: int = 4
    min_df: int = 2
    output_dim: int = 256

    def __post_init__(self) -> None:
        check_field_types(self)
        _check(1 <= self.ngram_min <= self.ngram_max <= 8, "need 1 <= ngram_min <= ngram_max <= 8")
        _check(self.min_df >= 1, "min_df must be at least 1")
        _check(2 <= self.output_dim <= 4096, "output_dim must be between 2 and 4096")


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


NEURAL_ENCODERS: dict[str, tuple[type[NeuralEncoder], type]] = {
    CharBiLSTMEncoder.kind: (CharBiLSTMEncoder, CharBiLSTMConfig),
    NgramBagEncoder.kind: (NgramBagEncoder, NgramBagConfig),
    ConvWordsEncoder.kind: (ConvWordsEncoder, ConvWordsConfig),
    S2NetEncoder.kind: (S2NetEncoder, S2NetConfig),
}
