"""A fastText-style hashed bag of words and character n-grams, with its config and the n-gram
ids it is fed."""

from __future__ import annotations

import functools
import zlib
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


def _crc32_table() -> np.ndarray:
    """zlib's CRC-32 (reflected, polynomial 0xEDB88320) a byte at a time: 256 uint32."""
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(0xEDB88320), table >> 1)
    return table.astype(np.uint32)


_CRC32 = _crc32_table()
# Fewer texts are hashed one by one: the vectorised hash's fixed cost (about 0.2 ms) is more
# than Python's for a text or a few (0.05 ms each), and one text is a request's whole encoding.
_HASHED_AT_ONCE_FROM = 8


def ngram_bag_id_rows(
    texts: Sequence[str], config: NgramBagConfig
) -> tuple[np.ndarray, np.ndarray]:
    """``ngram_bag_ids`` of many texts at once: (every text's ids one after the other, int32;
    each text's count, int64). The same ids in the same order; every text's n-grams are hashed
    by one vectorised CRC-32 over their UTF-8 bytes, which Python did one string at a time (21
    of the 24 ms the O*NET student took to encode 500 titles: ``bench/batch_stages.py``)."""
    if len(texts) < _HASHED_AT_ONCE_FROM:
        return _ids_one_by_one(texts, config)
    keys = [comparison_key(text) for text in texts]
    # An ASCII key is its own key: only the others are folded again, as one text's are.
    padded = [f" {key if key.isascii() else comparison_key(key)} " for key in keys]
    try:
        points = np.frombuffer("".join(padded).encode("utf-32-le"), np.uint32)
    except UnicodeEncodeError:  # a lone surrogate: refused as one text alone refuses it
        return _ids_one_by_one(texts, config)
    ngrams, ngram_counts = _ngram_ids(points, padded, config)
    word_ids, word_counts = _word_ids(keys, config) if config.words else _no_words(len(keys))
    counts = ngram_counts + word_counts
    counts[counts == 0] = 1  # a text with neither: [0]
    starts = np.cumsum(counts) - counts
    flat = np.zeros(int(counts.sum()), np.int32)
    flat[_places(starts, ngram_counts)] = ngrams
    flat[_places(starts + ngram_counts, word_counts)] = word_ids
    return flat, counts


def _ids_one_by_one(
    texts: Sequence[str], config: NgramBagConfig, ids_of=ngram_bag_ids
) -> tuple[np.ndarray, np.ndarray]:
    rows = [ids_of(text, config) for text in texts]
    flat = np.concatenate(rows) if rows else np.zeros(0, np.int32)
    return flat, np.fromiter(map(len, rows), np.int64, len(rows))


def _places(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``starts[i], starts[i] + 1, … counts[i]`` of them, for every i, one after the other."""
    firsts = np.cumsum(counts) - counts
    return np.repeat(starts - firsts, counts) + np.arange(int(counts.sum()))


def _utf8_bytes(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each code point's UTF-8 bytes, (P, 4) uint8 padded with zeros, and their count, (P,)."""
    sizes = 1 + (points >= 0x80) + (points >= 0x800) + (points >= 0x10000)
    encoded = np.zeros((len(points), 4), np.uint8)
    lead = np.array([0, 0, 0xC0, 0xE0, 0xF0], np.uint32)[sizes]
    shift = (sizes - 1) * 6
    encoded[:, 0] = np.where(sizes == 1, points, lead | (points >> shift))
    for position in range(1, 4):
        follows = sizes > position
        shift = (sizes - 1 - position) * 6
        encoded[:, position] = np.where(follows, 0x80 | ((points >> shift) & 0x3F), 0)
    return encoded, sizes


def _ngram_ids(
    points: np.ndarray, padded: list[str], config: NgramBagConfig
) -> tuple[np.ndarray, np.ndarray]:
    """The buckets of each text's distinct character n-grams, shortest first and in order of
    first occurrence (as ``dict.fromkeys`` keeps them), all texts' one after the other; and
    each text's count. ``points``: the texts' code points one after the other."""
    lengths = np.fromiter(map(len, padded), np.int64, len(padded))
    text_of = np.repeat(np.arange(len(padded)), lengths)
    room = np.repeat(np.cumsum(lengths), lengths) - np.arange(len(points))  # to its text's end
    windows = np.concatenate([points, np.zeros(config.ngram_max, np.uint32)])
    encoded, sizes = _utf8_bytes(windows)
    # An n-gram told apart from the others of its text by one uint64 (its text, its length,
    # each character + 1) where that fits: sorting those is a fifth of sorting every column.
    # Characters are numbered by code point, or among the batch's own where that is too wide.
    symbols = windows
    text_bits = max(len(padded) - 1, 1).bit_length()
    room_for_chars = (64 - text_bits - 4) // config.ngram_max
    if (int(points.max(initial=0)) + 1).bit_length() > room_for_chars:
        symbols = np.unique(windows, return_inverse=True)[1].astype(np.uint32)
    char_bits = (int(symbols.max(initial=0)) + 1).bit_length()
    packed = char_bits <= room_for_chars
    chars = np.zeros(len(points), np.uint64)
    state = np.full(len(points), 0xFFFFFFFF, np.uint32)
    found_texts, found_sizes, found_starts, found_ids, found_keys = [], [], [], [], []
    for size in range(1, config.ngram_max + 1):
        at = np.arange(size - 1, size - 1 + len(points))  # each window's last character
        for position in range(int(sizes[at].max(initial=1))):
            updated = _CRC32[(state ^ encoded[at, position]) & 0xFF] ^ (state >> np.uint32(8))
            state = np.where(sizes[at] > position, updated, state)
        if packed:
            shift = np.uint64(char_bits * (size - 1))
            chars |= (symbols[at].astype(np.uint64) + np.uint64(1)) << shift
        if size < config.ngram_min:
            continue
        fits = np.flatnonzero(room >= size)
        found_texts.append(text_of[fits])
        found_ids.append((state[fits] ^ np.uint32(0xFFFFFFFF)) % np.uint32(config.buckets))
        if packed:
            head = (text_of[fits].astype(np.uint64) << np.uint64(4)) | np.uint64(size)
            found_keys.append((head << np.uint64(char_bits * config.ngram_max)) | chars[fits])
        else:
            found_sizes.append(np.full(len(fits), size, np.uint32))
            found_starts.append(fits)
    # Each text's n-grams, shortest first, in reading order (a stable sort keeps both).
    texts = np.concatenate(found_texts)
    order = np.argsort(texts, kind="stable")
    texts = texts[order]
    ids = np.concatenate(found_ids)[order]
    if packed:
        keys = np.concatenate(found_keys)[order]
        same = np.argsort(keys, kind="stable")
    else:  # a row of (text, length, each character + 1) each
        window_sizes = np.concatenate(found_sizes)[order]
        window_starts = np.concatenate(found_starts)[order]
        columns = [
            np.where(offset < window_sizes, windows[window_starts + offset] + 1, 0)
            for offset in range(config.ngram_max)
        ]
        keys = np.stack([texts, window_sizes, *columns], axis=1).astype(np.uint64)
        same = np.lexsort(keys.T[::-1])
    # The first of each text's equal n-grams: a stable sort puts it first among its equals.
    keys = keys[same]
    differs = np.ones(len(same), bool)
    if len(same):
        unequal = keys[1:] != keys[:-1]
        differs[1:] = unequal if packed else unequal.any(axis=1)
    first = np.zeros(len(same), bool)
    first[same[differs]] = True
    counts = np.bincount(texts[first], minlength=len(padded))
    return ids[first].astype(np.int32), counts.astype(np.int64)


def _no_words(count: int) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros(0, np.int32), np.zeros(count, np.int64)


def _word_ids(keys: list[str], config: NgramBagConfig) -> tuple[np.ndarray, np.ndarray]:
    """The buckets of each text's words (``w:`` and the word, repeats kept), all texts' one
    after the other; and each text's count."""
    prefix = zlib.crc32(b"w:")
    words = [WORD.findall(key) for key in keys]
    counts = np.fromiter(map(len, words), np.int64, len(words))
    hashes = np.fromiter(
        (zlib.crc32(word.encode("utf-8"), prefix) for row in words for word in row),
        np.int64,
        int(counts.sum()),
    )
    return (hashes % config.buckets).astype(np.int32), counts


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
        if train:
            flat, lengths = _ids_one_by_one(texts, self.config, training_ngram_bag_ids)
        else:
            flat, lengths = ngram_bag_id_rows(texts, self.config)
        offsets = np.cumsum(lengths) - lengths
        return {
            "ids": torch.from_numpy(flat.astype(np.int64)),
            "offsets": torch.from_numpy(offsets),
        }

    def after_training(self, texts: Sequence[str]) -> None:
        used = torch.zeros(self.config.buckets, dtype=torch.bool)
        if texts:
            rows = np.unique(ngram_bag_id_rows(texts, self.config)[0])
            used[torch.from_numpy(rows.astype(np.int64))] = True
        with torch.no_grad():
            self.bag.weight[~used.to(self.bag.weight.device)] = 0.0
        training_ngram_bag_ids.cache_clear()  # training is over: the kept ids are not needed

    def forward(self, features):
        bag = self.bag(features["ids"], features["offsets"])  # (B, E)
        if self.config.activation == "tanh":
            bag = torch.tanh(bag)
        return self.dense(self.dropout(bag))  # (B, D)
