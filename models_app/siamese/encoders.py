"""Encoders: short texts in, L2-normalised float32 vectors out.

Every encoder has a frozen config dataclass, ``fit`` (train from member strings), ``encode``,
``save`` and ``load``. ``fit_encoder`` and ``load_encoder`` pick the class by the config's
``kind``, so the services never name a concrete encoder.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

from models_app.siamese.artifacts import ArtifactError, read_manifest
from models_app.siamese.compiled import onnxruntime_available
from models_app.siamese.configs import ENCODER_ARTIFACT, ConfigError
from models_app.siamese.networks.char_bilstm import CharBiLSTMConfig, CharBiLSTMEncoder
from models_app.siamese.networks.conv_words import ConvWordsConfig, ConvWordsEncoder
from models_app.siamese.networks.ngram_bag import NgramBagConfig, NgramBagEncoder
from models_app.siamese.networks.s2net import S2NetConfig, S2NetEncoder
from models_app.siamese.tfidf import CharNgramConfig, CharNgramTfidfEncoder
from models_app.siamese.towers import TransformerConfig, TransformerEncoder


class Encoder(Protocol):
    kind: ClassVar[str]

    @property
    def dim(self) -> int: ...

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...

    def save(self, folder: Path) -> None: ...


def _registry() -> dict[str, tuple[type, type]]:
    return {
        CharNgramTfidfEncoder.kind: (CharNgramTfidfEncoder, CharNgramConfig),
        CharBiLSTMEncoder.kind: (CharBiLSTMEncoder, CharBiLSTMConfig),
        NgramBagEncoder.kind: (NgramBagEncoder, NgramBagConfig),
        ConvWordsEncoder.kind: (ConvWordsEncoder, ConvWordsConfig),
        S2NetEncoder.kind: (S2NetEncoder, S2NetConfig),
        TransformerEncoder.kind: (TransformerEncoder, TransformerConfig),
    }


def encoder_kinds() -> list[str]:
    return sorted(_registry())


def parse_config(raw: dict[str, Any]) -> Any:
    """Build the config dataclass that ``raw["kind"]`` names; unknown keys are errors."""
    if not isinstance(raw, dict):
        raise ConfigError("an encoder config must be a JSON object")
    registry = _registry()
    kind = raw.get("kind", CharNgramConfig.kind)
    if kind not in registry:
        raise ConfigError(f"unknown encoder kind {kind!r}; choose one of {encoder_kinds()}")
    config_class = registry[kind][1]
    known = {field.name for field in dataclasses.fields(config_class)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"unknown option(s) for {kind}: {', '.join(unknown)}")
    try:
        return config_class(**{**raw, "kind": kind})
    except TypeError as exc:
        raise ConfigError(str(exc)) from None


def encoder_class(kind: str) -> type:
    return _registry()[kind][0]


def fit_encoder(texts: Sequence[str], raw_config: dict[str, Any]) -> Encoder:
    """Fit an encoder that needs no training (``char_ngram_tfidf``)."""
    config = parse_config(raw_config)
    if config.kind != CharNgramTfidfEncoder.kind:
        raise ConfigError(f"{config.kind} is trained, not fitted: use train.train_encoder")
    return CharNgramTfidfEncoder.fit(texts, config)


def load_encoder(folder: Path, *, mapped: bool = False) -> Encoder:
    """The encoder saved in ``folder``. ``mapped``: its big arrays are served from
    memory-mapped files (written beside it by the first process that loads it), so every
    process on a host shares one copy; for serving, where the encoder only encodes."""
    manifest = read_manifest(folder, kind=ENCODER_ARTIFACT)
    try:
        config = parse_config(manifest["config"])
    except (KeyError, ConfigError) as exc:
        raise ArtifactError(f"encoder in {folder} has an unusable config: {exc}") from None
    return encoder_class(config.kind).load(folder, config, mapped=mapped)


def compile_encoder(folder: Path) -> bool:
    """Compile the encoder saved in ``folder`` for serving, where that pays: the tower through
    ONNX Runtime (``compiled.py``); the n-gram encoders spend their time hashing n-grams,
    which no runtime speeds up. True when a compiled copy was written, False when a
    current one was there or the kind is not compiled."""
    config = parse_config(read_manifest(folder, kind=ENCODER_ARTIFACT)["config"])
    if not hasattr(encoder_class(config.kind), "compile_for_serving"):
        return False
    if not onnxruntime_available():
        raise ArtifactError("onnxruntime is not installed: the tower cannot be compiled")
    return load_encoder(folder).compile_for_serving(Path(folder))


def compiled_rebuild_wanted(encoder: Encoder) -> str | None:
    """Why a served encoder of a compiled kind encodes with PyTorch when compiling it again
    would help (its compiled copy missing, stale or damaged); None when it serves compiled, is
    of a kind never compiled, or no runtime is installed to compile it with."""
    compiled = getattr(encoder, "compiled", None)
    if compiled is None or compiled.problem is None or not onnxruntime_available():
        return None
    return compiled.problem


def as_stored(encoder: Encoder) -> Encoder:
    """``encoder`` as saving and loading it gives it back: what it answers once served. A
    neural encoder is stored smaller than it trains (the n-gram table as int8 rows, other
    weights as float16), which moves near ties; a model measured before it is stored, or never
    stored, is measured this way to be compared fairly with one loaded from disk."""
    with tempfile.TemporaryDirectory(prefix="siamweb-as-stored-") as folder:
        encoder.save(Path(folder))
        return load_encoder(Path(folder))
