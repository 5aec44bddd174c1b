"""What every trainable encoder shares: ``NeuralEncoder`` (featurize, forward, encode, save and
load), the config check and the process-stable hash the hashed encoders use."""

from __future__ import annotations

import dataclasses
import json
import random
import re
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from models_app.siamese.artifacts import DAMAGED_FILE_ERRORS, ArtifactError, write_manifest
from models_app.siamese.configs import ENCODER_ARTIFACT, ConfigError
from models_app.siamese.mapped import mapped_arrays

WORD = re.compile(r"\w+", re.UNICODE)
_WEIGHTS = "weights.pt"
_VOCABULARY = "vocabulary.json"
MAPPED_WEIGHTS = "mapped-weights"  # the weights as served, one .npy a tensor


def require(condition: bool, message: str) -> None:
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
    def load(cls, folder: Path, config: Any, *, mapped: bool = False) -> NeuralEncoder:
        """The encoder saved in ``folder``; ``mapped``: serving from memory-mapped weights
        (``map_weights``)."""
        folder = Path(folder)
        try:
            vocabulary = json.loads((folder / _VOCABULARY).read_text())
        except (OSError, ValueError) as exc:
            raise ArtifactError(f"encoder files in {folder} are unreadable: {exc}") from None
        module = cls.for_loading(config, vocabulary)
        if mapped:
            module.map_weights(folder, read=True)
        else:
            module.read_weights(folder)
        module.eval()
        return module

    def read_weights(self, folder: Path) -> None:
        """The weights saved in ``folder``, decoded into this module."""
        try:
            state = torch.load(Path(folder) / _WEIGHTS, map_location="cpu", weights_only=True)
        except (*DAMAGED_FILE_ERRORS, RuntimeError) as exc:
            raise ArtifactError(
                f"encoder files in {folder} are unreadable: {type(exc).__name__}: {exc}"
            ) from None
        try:
            state = {
                name: tensor.float() if tensor.is_floating_point() else tensor
                for name, tensor in state.items()
            }
            self.load_state_dict(self.state_from_disk(state))
        except (RuntimeError, KeyError, IndexError) as exc:
            raise ArtifactError(f"weights in {folder} do not fit the config: {exc}") from None

    def map_weights(self, folder: Path, *, read: bool = False) -> None:
        """Serve from the weights as decoded (float32, the n-gram table whole), kept in
        memory-mapped files under ``folder``: written by the first process that loads this
        encoder, mapped by every later one through the page cache instead of each decoding its
        own copy. ``read``: the module holds no weights yet; only a process that writes the
        files decodes them (``read_weights``). Mapped copy-on-write: a write (a fine-tune works
        on a deep copy) changes only the writer's pages, never the file."""

        def decoded() -> dict[str, np.ndarray]:
            if read:
                self.read_weights(folder)
            return {
                name: tensor.detach().cpu().numpy() for name, tensor in self.state_dict().items()
            }

        arrays = mapped_arrays(Path(folder) / MAPPED_WEIGHTS, of=_WEIGHTS, compute=decoded,
                               mode="c")  # fmt: skip
        state = {name: torch.from_numpy(array) for name, array in arrays.items()}
        try:
            self.load_state_dict(state, assign=True)
        except (RuntimeError, KeyError) as exc:
            raise ArtifactError(
                f"mapped weights in {folder} do not fit the encoder: {exc}; delete "
                f"{Path(folder) / MAPPED_WEIGHTS} to have them written again"
            ) from None

    @classmethod
    def create(cls, texts: Sequence[str], config: Any) -> NeuralEncoder:
        """An untrained module whose vocabulary (if any) comes from ``texts``."""
        return cls.from_vocabulary(config, None)

    @classmethod
    def from_vocabulary(cls, config: Any, vocabulary: Any) -> NeuralEncoder:
        return cls(config)

    @classmethod
    def for_loading(cls, config: Any, vocabulary: Any) -> NeuralEncoder:
        """The module ``load`` fills with the saved weights."""
        return cls.from_vocabulary(config, vocabulary)
