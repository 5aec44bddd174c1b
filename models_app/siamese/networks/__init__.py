"""Trainable encoders: the paper's character BiLSTM, a hashed n-gram bag, a hashed-word CNN and
S2Net's linear projection of TF-IDF vectors.

Each is an ``nn.Module`` configured by a frozen dataclass. ``featurize`` turns texts into input
tensors (with the training-time randomness of the paper where it has any), ``forward`` returns
raw embeddings ``(B, D)``, and ``encode`` gives the L2-normalised numpy vectors that the index
and every matcher use.

One module an encoder (``char_bilstm``, ``ngram_bag``, ``conv_words``, ``s2net``) beside what
they share (``base``). Callers import from here.
"""

from __future__ import annotations

from models_app.siamese.networks.base import NeuralEncoder, stable_hash
from models_app.siamese.networks.char_bilstm import CharBiLSTMConfig, CharBiLSTMEncoder, char_ids
from models_app.siamese.networks.conv_words import ConvWordsConfig, ConvWordsEncoder
from models_app.siamese.networks.ngram_bag import (
    NGRAM_IDS_KEPT_WHILE_TRAINING,
    NgramBagConfig,
    NgramBagEncoder,
    _training_ngram_bag_ids,
    ngram_bag_ids,
)
from models_app.siamese.networks.s2net import S2NetConfig, S2NetEncoder

NEURAL_ENCODERS: dict[str, tuple[type[NeuralEncoder], type]] = {
    CharBiLSTMEncoder.kind: (CharBiLSTMEncoder, CharBiLSTMConfig),
    NgramBagEncoder.kind: (NgramBagEncoder, NgramBagConfig),
    ConvWordsEncoder.kind: (ConvWordsEncoder, ConvWordsConfig),
    S2NetEncoder.kind: (S2NetEncoder, S2NetConfig),
}

__all__ = [
    "NEURAL_ENCODERS",
    "NGRAM_IDS_KEPT_WHILE_TRAINING",
    "CharBiLSTMConfig",
    "CharBiLSTMEncoder",
    "ConvWordsConfig",
    "ConvWordsEncoder",
    "NeuralEncoder",
    "NgramBagConfig",
    "NgramBagEncoder",
    "S2NetConfig",
    "S2NetEncoder",
    "_training_ngram_bag_ids",
    "char_ids",
    "ngram_bag_ids",
    "stable_hash",
]
