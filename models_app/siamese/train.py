"""Training: the loop, early stopping, checkpoints, resume and fine-tuning.

``sampling.prepare_data`` turns members (group id, text) and curator feedback into a
``TrainingData``; ``train_encoder`` runs the loop on it. Both are plain functions over plain
data: the Django services load the rows and call them. Specs and configs are in ``specs``.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from models_app.siamese.configs import ConfigError
from models_app.siamese.encoders import Encoder, encoder_class, parse_config
from models_app.siamese.losses import build_loss
from models_app.siamese.networks.base import NeuralEncoder
from models_app.siamese.optim import Optimizer
from models_app.siamese.progress import Progress, budget_fraction, no_progress
from models_app.siamese.sampling import BatchSampler, TrainingData
from models_app.siamese.specs import (
    DEFAULT_LOSS_PARAMS,
    MARGIN_LOSSES,
    PAIRWISE_LOSSES,
    TRIPLE_LOSSES,
    TrainConfig,
)
from models_app.siamese.tfidf import CharNgramTfidfEncoder

CHECKPOINT = "checkpoint.pt"

# Training reports its progress (and time left) at least this often, in seconds.
PROGRESS_EVERY_SECONDS = 3.0


@dataclass
class TrainResult:
    encoder: Encoder
    metrics: dict[str, float]
    history: list[dict[str, float]]
    steps: int
    stopped_because: str
    device: str
    seconds: float
    # The weights as training left them, before a fine-tune's blend with its parent (``encoder``
    # itself when nothing was blended). A later phase continues from these: continuing from the
    # blended model and blending again would keep the parent's share twice over.
    trained_encoder: Encoder


def _embed(encoder: NeuralEncoder, texts: list[str], rng: random.Random) -> torch.Tensor:
    # Search is by cosine, so every loss sees unit vectors: what it shapes is what is searched.
    return torch.nn.functional.normalize(encoder.embed(texts, train=True, rng=rng), dim=1)


def loss_step(
    encoder: NeuralEncoder, loss: torch.nn.Module, name: str, batch: dict, rng: random.Random
) -> torch.Tensor:
    """Embed the batch's texts and apply the configured loss."""
    if name in PAIRWISE_LOSSES:
        left = batch["anchors"] + [a for a, _ in batch["negatives"]]
        right = batch["positives"] + [b for _, b in batch["negatives"]]
        labels = torch.cat(
            [torch.ones(len(batch["anchors"])), torch.zeros(len(batch["negatives"]))]
        ).to(encoder.device)
        a = _embed(encoder, left, rng)  # (P + N, D)
        b = _embed(encoder, right, rng)  # (P + N, D)
        return loss(a, b, labels)
    anchors = _embed(encoder, batch["anchors"], rng)  # (B, D)
    positives = _embed(encoder, batch["positives"], rng)  # (B, D)
    if name in TRIPLE_LOSSES:
        negatives = _embed(encoder, [b for _, b in batch["negatives"]], rng)
        return loss(anchors, positives, negatives)
    groups = torch.tensor(batch["groups"], device=encoder.device)
    if name in MARGIN_LOSSES and "margins" in batch:
        # Unit vectors: ||a - b||^2 = 2 - 2 cos, so a cosine margin is twice that in distance.
        margins = 2.0 * torch.tensor(batch["margins"], device=encoder.device)
        return loss(anchors, positives, groups, positive_margin=margins)
    if name == "triplet":
        generator = torch.Generator(device=encoder.device).manual_seed(rng.randrange(2**31))
        return loss(anchors, positives, groups, generator=generator)
    return loss(anchors, positives, groups)


def validation_accuracy(
    encoder: Encoder, data: TrainingData, train_vectors: np.ndarray | None = None
) -> float:
    """Share of held-out strings whose nearest training string is in their group.

    With nothing held out (a tiny taxonomy) it is measured on the training strings themselves.
    ``train_vectors`` are the training strings already encoded by ``encoder``, when at hand.
    The search is exact and needs no index library, so training runs on a machine that has
    only torch (a GPU worker image, say); nearest member first is the product's top-1 rule.
    """
    if not data.validation:
        data = dataclasses.replace(data, validation=data.train)
    if train_vectors is None:
        train_vectors = encoder.encode([t for _, t in data.train])
    members = torch.from_numpy(np.ascontiguousarray(train_vectors, dtype=np.float32))
    groups = torch.tensor([g for g, _ in data.train])
    queries = torch.from_numpy(encoder.encode([t for _, t in data.validation]))
    targets = torch.tensor([g for g, _ in data.validation])
    hits = 0
    for start in range(0, len(queries), 1024):
        nearest = (queries[start : start + 1024] @ members.T).argmax(dim=1)
        hits += int((groups[nearest] == targets[start : start + 1024]).sum())
    return hits / len(data.validation)


def choose_device(name: str) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' was asked for but CUDA is not available")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def set_threads(threads: int) -> None:
    torch.set_num_threads(threads or max(1, os.cpu_count() or 1))


# Options added after checkpoints were first written, with the value that means "as before": a
# checkpoint written before an option existed still resumes while the run leaves it at that.
_OPTIONS_ADDED_LATER = {"feedback_margin": 0.0}


def _checkpoint_train_config(config: TrainConfig) -> dict[str, Any]:
    """The training config as a checkpoint's fingerprint records it."""
    return {
        name: value
        for name, value in dataclasses.asdict(config).items()
        if not (name in _OPTIONS_ADDED_LATER and value == _OPTIONS_ADDED_LATER[name])
    }


def _save_checkpoint(folder: Path, state: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    scratch = folder / f".{CHECKPOINT}.tmp"
    torch.save(state, scratch)
    scratch.replace(folder / CHECKPOINT)  # a reader sees the old file or the new, whole


def train_encoder(
    data: TrainingData,
    encoder_config: dict[str, Any],
    config: TrainConfig,
    *,
    parent: Encoder | None = None,
    anchor: Encoder | None = None,
    checkpoint_dir: Path | None = None,
    discard_stale_checkpoint: bool = False,
    progress: Progress = no_progress,
) -> TrainResult:
    """Train (or, with ``parent``, fine-tune) an encoder; returns the best one seen.

    A fine-tune's result keeps ``config.keep_parent_share`` of the weights of ``anchor``
    (default: ``parent``, the model it started from). A second phase starts from the first
    phase's ``trained_encoder`` (its weights before the blend) and passes the first phase's
    parent as ``anchor``, so the result keeps that share of the version it will replace, once.

    With ``checkpoint_dir``, the state is saved at every evaluation and a later call with the
    same data and configs resumes from it. A checkpoint written for other data or configs is
    refused, or with ``discard_stale_checkpoint`` removed so that training starts afresh.
    """
    started = time.monotonic()
    parsed = parse_config(encoder_config)
    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)
    np.random.seed(config.seed % 2**32)

    if parsed.kind == CharNgramTfidfEncoder.kind:
        progress("train", 0.0, None)
        # Nothing is learned from labels here, so every string shapes the vocabulary.
        encoder = CharNgramTfidfEncoder.fit([t for _, t in data.train + data.validation], parsed)
        accuracy = validation_accuracy(encoder, data)
        progress("train", 1.0, 0.0)
        return TrainResult(
            encoder, {"validation_accuracy": accuracy}, [], 0, "fitted", "cpu",
            time.monotonic() - started, trained_encoder=encoder,
        )  # fmt: skip

    device = choose_device(config.device)
    if device.type == "cpu":
        set_threads(config.threads)
    if anchor is not None and parent is None:
        raise ConfigError("an anchor to blend toward needs a parent to fine-tune")
    if parent is not None:
        if not isinstance(parent, NeuralEncoder) or parent.config != parsed:
            raise ConfigError(
                "the parent checkpoint was trained with another encoder config; fine-tuning "
                "needs the same one"
            )
        encoder = copy.deepcopy(parent)
    else:
        encoder = encoder_class(parsed.kind).create([t for _, t in data.train], parsed)
    encoder.to(device)
    loss_params = {**DEFAULT_LOSS_PARAMS.get(config.loss, {}), **config.loss_params}
    loss = build_loss(config.loss, loss_params, dim=encoder.dim).to(device)
    optimizer = Optimizer(encoder, loss, config.learning_rate)
    sampler = BatchSampler(data, config, rng, fine_tuning=parent is not None)

    step, best_metric, best_state, history, bad_evaluations = 0, -math.inf, None, [], 0
    fingerprint = {
        "data_sha256": data.sha256,
        "encoder_config": dataclasses.asdict(parsed),
        "train_config": _checkpoint_train_config(config),
    }
    checkpoint_path = checkpoint_dir / CHECKPOINT if checkpoint_dir else None
    saved = None
    if checkpoint_path is not None and checkpoint_path.exists():
        saved = torch.load(checkpoint_path, map_location=device, weights_only=False)
        if saved["fingerprint"] != fingerprint:
            if not discard_stale_checkpoint:
                raise ConfigError(
                    f"{checkpoint_path} was written for other data or configs; remove it to "
                    "start over"
                )
            checkpoint_path.unlink()
            saved = None
    resumed_from = 0
    if saved is not None:
        resumed_from = saved["step"]
        encoder.load_state_dict(saved["encoder"])
        loss.load_state_dict(saved["loss"])
        optimizer.load_state_dict(saved["optimizer"])
        step, best_metric, history = saved["step"], saved["best_metric"], saved["history"]
        best_state, bad_evaluations = saved["best_state"], saved["bad_evaluations"]
        rng.setstate(saved["rng"])
        sampler.confusable = saved["confusable"]

    train_texts = [text for _, text in data.train]
    if parent is not None and best_metric == -math.inf:
        train_vectors = encoder.encode(train_texts)
        # Fine-tuning must beat its parent.
        best_metric = validation_accuracy(encoder, data, train_vectors)
        best_state = copy.deepcopy(encoder.state_dict())
        history.append({"step": 0, "validation_accuracy": best_metric})
        if config.hard_negative_share > 0:
            sampler.refresh_confusable(train_vectors)

    deadline = started + config.max_minutes * 60
    stopped_because = "max_steps" if config.max_steps else "pretrained, served as it comes"
    encoder.train()
    if step < config.max_steps:
        # Before the first steps are timed, the time budget is what is left at most.
        progress("train", 0.0, max(0.0, deadline - time.monotonic()))
    reported_at = time.monotonic()
    while step < config.max_steps:
        if time.monotonic() > deadline:
            stopped_because = "time budget"
            break
        optimizer.zero_grad(set_to_none=True)
        value = loss_step(encoder, loss, config.loss, sampler.batch(), rng)
        value.backward()
        optimizer.step()
        step += 1
        if step % config.eval_every == 0 or step == config.max_steps:
            progress("evaluate", step / config.max_steps, None)
            train_vectors = encoder.encode(train_texts)  # once, for both uses below
            metric = validation_accuracy(encoder, data, train_vectors)
            history.append({"step": step, "loss": value.item(), "validation_accuracy": metric})
            if metric > best_metric:
                best_metric, bad_evaluations = metric, 0
                if config.select_best:
                    best_state = copy.deepcopy(encoder.state_dict())
            else:
                bad_evaluations += 1
            if config.hard_negative_share > 0:
                sampler.refresh_confusable(train_vectors)
            encoder.train()
            if checkpoint_path is not None:
                _save_checkpoint(
                    checkpoint_dir,
                    {
                        "fingerprint": fingerprint,
                        "encoder": encoder.state_dict(),
                        "loss": loss.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "step": step,
                        "best_metric": best_metric,
                        "best_state": best_state,
                        "bad_evaluations": bad_evaluations,
                        "history": history,
                        "rng": rng.getstate(),
                        "confusable": sampler.confusable,
                    },
                )
            if config.select_best and bad_evaluations >= config.patience:
                stopped_because = "early stopping"
                break
        # Every 20 steps, and every few seconds where steps are slow (a large n-gram table on
        # a busy CPU takes a second or more a step): the run's ETA is never long stale.
        if step % 20 == 0 or time.monotonic() - reported_at >= PROGRESS_EVERY_SECONDS:
            reported_at = time.monotonic()
            elapsed = time.monotonic() - started
            eta = min(
                elapsed / step * (config.max_steps - step),
                max(0.0, deadline - time.monotonic()),
            )
            done = budget_fraction(step, config.max_steps, started, config.max_minutes)
            progress("train", done, eta)

    if (
        stopped_because == "time budget"
        and step > 0
        and (not history or history[-1]["step"] != step)
    ):
        # Stopped by the clock between two validations: the steps since the last one are
        # measured too, so the run's curve ends where its training did.
        metric = validation_accuracy(encoder, data, encoder.encode(train_texts))
        history.append({"step": step, "validation_accuracy": metric})
        if metric > best_metric and config.select_best:
            best_metric, best_state = metric, copy.deepcopy(encoder.state_dict())
    if best_state is not None and config.select_best:
        encoder.load_state_dict(best_state)
    encoder.to("cpu")
    blended = parent is not None and config.keep_parent_share > 0
    trained_encoder = encoder
    if blended:
        trained_encoder = copy.deepcopy(encoder).eval()
        blend_weights(encoder, anchor or parent, keep=config.keep_parent_share)
    encoder.after_training([t for _, t in data.train + data.validation])
    encoder.eval()
    # Stopped before its first evaluation, or blended into weights no evaluation saw: the
    # figure reported is the returned model's.
    # A pretrained model served as it comes (0 steps) is not measured here: encoding every
    # string for it would double what a new taxonomy waits for; its build evaluates it.
    if (best_metric == -math.inf and config.max_steps) or blended:
        best_metric = validation_accuracy(encoder, data)
    metrics = {"steps": float(step), "resumed_from_step": float(resumed_from)}
    if best_metric != -math.inf:
        metrics["validation_accuracy"] = best_metric
    return TrainResult(
        encoder=encoder,
        metrics=metrics,
        history=history,
        steps=step,
        stopped_because=stopped_because,
        device=device.type,
        seconds=time.monotonic() - started,
        trained_encoder=trained_encoder,
    )


def blend_weights(encoder: NeuralEncoder, other: Encoder, *, keep: float) -> None:
    """Set each of ``encoder``'s weights to ``1 - keep`` of its own plus ``keep`` of
    ``other``'s, in place. ``other`` has the same architecture (an ancestor of it)."""
    theirs = other.state_dict() if isinstance(other, NeuralEncoder) else {}
    mine = encoder.state_dict()
    # Same config is not enough where a vocabulary comes from the data (conv_words, s2net).
    if (
        getattr(other, "config", None) != encoder.config
        or theirs.keys() != mine.keys()
        or any(theirs[name].shape != value.shape for name, value in mine.items())
    ):
        raise ConfigError("weights can only be blended with a model of the same architecture")
    with torch.no_grad():
        for name, value in mine.items():
            if value.is_floating_point():  # counters, if an encoder ever has one, stay its own
                value.mul_(1 - keep).add_(theirs[name].to(value.device, value.dtype), alpha=keep)
