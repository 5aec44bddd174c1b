"""Distillation: a fast student (the n-gram bag, the char BiLSTM) learns to embed texts where a
teacher (the pretrained tower) puts them.

The tower knows language but encodes a few hundred strings a second on 2 cores; the n-gram bag
encodes tens of thousands. The student is trained on the teacher's vectors of the texts the
product has: the taxonomy's strings, augmented copies of them (typos, job-ad words, synonyms),
curators' inputs and the unlabelled inputs received. Two terms: the cosine between student and
teacher vector of each text, and an in-batch softmax over student-teacher similarities, so the
student also keeps the teacher's ranking of texts against each other, which is what search uses.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from models_app.siamese.augment.extra_words import ExtraWords
from models_app.siamese.augment.typos import add_typos
from models_app.siamese.configs import ConfigError
from models_app.siamese.encoders import Encoder, encoder_class, parse_config
from models_app.siamese.networks.base import NeuralEncoder
from models_app.siamese.optim import Optimizer
from models_app.siamese.progress import budget_fraction, encode_reporting, no_progress
from models_app.siamese.specs import DistillConfig
from models_app.siamese.train import TrainResult, choose_device, set_threads


def distillation_texts(
    members: Sequence[str], inputs: Sequence[str], *, copies: int, seed: int
) -> list[str]:
    """The taxonomy's strings, ``copies`` augmented copies of each, and the inputs; distinct."""
    rng = random.Random(seed)
    words = ExtraWords("train")
    texts = list(members) + list(inputs)
    for member in members:
        for copy_number in range(copies):
            # Alternate the two noises real inputs carry: job-ad words and typing errors.
            if copy_number % 2 == 0:
                texts.append(words.decorate(member, rng))
            else:
                texts.append(add_typos(member, rng))
    return list(dict.fromkeys(text for text in texts if text.strip()))


def distill_encoder(
    texts: Sequence[str],
    teacher: Encoder,
    student_config: dict,
    config: DistillConfig,
    *,
    teacher_vectors: np.ndarray | None = None,
    progress=no_progress,
) -> TrainResult:
    """Train a student of ``student_config`` to reproduce ``teacher``'s vectors of ``texts``.

    ``teacher_vectors``: the texts already encoded by the teacher (the slow part), when at hand.
    The student is searched in the teacher's place, so its output has the teacher's dimension:
    taken from the teacher when ``student_config`` names no ``output_dim``, refused when it
    names another.
    """
    started = time.monotonic()
    if teacher is None:
        raise ConfigError("distillation needs a teacher model")
    if not texts:
        raise ConfigError("distillation needs texts to learn from")
    parsed = parse_config(student_config)
    kind = encoder_class(parsed.kind)
    if not issubclass(kind, NeuralEncoder) or parsed.kind == "transformer":
        raise ConfigError(f"{parsed.kind} cannot be a student: choose a fast trainable encoder")
    if "output_dim" not in student_config:
        parsed = parse_config({**student_config, "output_dim": teacher.dim})
    if getattr(parsed, "output_dim", None) != teacher.dim:
        raise ConfigError(
            f"the student's output_dim ({getattr(parsed, 'output_dim', None)}) must be the "
            f"teacher's dimension ({teacher.dim}): it is searched in the teacher's space"
        )
    texts = list(texts)
    if teacher_vectors is None:
        progress("teacher", 0.0, None)
        teacher_vectors = encode_reporting(teacher, texts, progress, "teacher")
    if teacher_vectors.shape != (len(texts), teacher.dim):
        raise ConfigError("teacher vectors do not match the texts")
    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)
    device = choose_device(config.device)
    if device.type == "cpu":
        set_threads(config.threads)
    student = kind.create(texts, parsed).to(device)
    targets = torch.from_numpy(np.ascontiguousarray(teacher_vectors, dtype=np.float32)).to(device)
    targets = F.normalize(targets, dim=1)
    optimizer = Optimizer(student, torch.nn.Module(), config.learning_rate)
    deadline = started + config.max_minutes * 60
    step, history, stopped_because = 0, [], "max_steps"
    student.train()
    while step < config.max_steps:
        if time.monotonic() > deadline:
            stopped_because = "time budget"
            break
        rows = rng.sample(range(len(texts)), min(config.batch_size, len(texts)))
        vectors = F.normalize(student.embed([texts[i] for i in rows], train=True, rng=rng), dim=1)
        wanted = targets[rows]
        cosine_loss = (1 - (vectors * wanted).sum(dim=1)).mean()
        logits = vectors @ wanted.T / config.temperature
        ranking_loss = F.cross_entropy(logits, torch.arange(len(rows), device=device))
        loss = cosine_loss + config.ranking_weight * ranking_loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        step += 1
        if step % 200 == 0:
            history.append(
                {
                    "step": step,
                    "loss": loss.detach().item(),
                    "cosine": 1 - cosine_loss.detach().item(),
                }
            )
            elapsed = time.monotonic() - started
            left = max(0.0, deadline - time.monotonic())
            eta = min(elapsed / step * (config.max_steps - step), left)
            done = budget_fraction(step, config.max_steps, started, config.max_minutes)
            progress("distil", done, eta)
    student.to("cpu")
    student.after_training(texts)
    student.eval()
    agreement = _mean_cosine(student, texts, teacher_vectors, rng)
    return TrainResult(
        encoder=student,
        metrics={"teacher_cosine": agreement, "steps": float(step)},
        history=history,
        steps=step,
        stopped_because=stopped_because,
        device=device.type,
        seconds=time.monotonic() - started,
        trained_encoder=student,
    )


def _mean_cosine(student, texts, teacher_vectors, rng, sample: int = 2000) -> float:
    """How close the student's vectors are to the teacher's, on a sample of the texts."""
    rows = rng.sample(range(len(texts)), min(sample, len(texts)))
    mine = student.encode([texts[i] for i in rows])
    theirs = teacher_vectors[rows]
    theirs = theirs / np.linalg.norm(theirs, axis=1, keepdims=True).clip(1e-12)
    value = float((mine * theirs).sum(axis=1).mean())
    return value if math.isfinite(value) else 0.0
