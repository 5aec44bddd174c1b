"""The paper's character BiLSTM (Neculoiu et al., 2016) and its config."""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from models_app.siamese.configs import check_field_types
from models_app.siamese.networks.base import NeuralEncoder, require
from models_app.siamese.text import comparison_key


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
        require(1 <= self.layers <= 8, "layers must be between 1 and 8")
        require(4 <= self.hidden <= 1024, "hidden must be between 4 and 1024")
        require(2 <= self.char_embedding <= 512, "char_embedding must be between 2 and 512")
        require(2 <= self.output_dim <= 4096, "output_dim must be between 2 and 4096")
        require(8 <= self.max_length <= 1000, "max_length must be between 8 and 1000")
        require(0 <= self.recurrent_dropout < 1, "recurrent_dropout must be in [0, 1)")
        require(0 <= self.layer_dropout < 1, "layer_dropout must be in [0, 1)")


_CHAR_VOCABULARY = 258  # 0 padding, 1..256 code points below 256, 257 any other character


def char_ids(text: str, max_length: int) -> list[int]:
    return [min(ord(ch), 256) + 1 for ch in comparison_key(text)[:max_length]] or [
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
