"""Training: data preparation, the loop, early stopping, checkpoints, resume and fine-tuning.

``prepare_data`` turns members (group id, text) and curator feedback into a ``TrainingData``;
``train_encoder`` runs the loop on it. Both are plain functions over plain data: the Django
services load the rows and call them.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import math
import os
import random
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from models_app.siamese import augment
from models_app.siamese.encoders import (
    CharNgramTfidfEncoder,
    ConfigError,
    Encoder,
    check_field_types,
    encoder_class,
    parse_config,
)
from models_app.siamese.evaluation import split_members
from models_app.siamese.losses import LOSSES, build_loss
from models_app.siamese.networks import NeuralEncoder
from models_app.siamese.text import normalize_text

# (stage, fraction done in [0, 1], seconds left or None)
Progress = Callable[[str, float, float | None], None]
PAIRWISE_LOSSES = {"contrastive", "hybrid"}
TRIPLE_LOSSES = {"s2net"}
MARGIN_LOSSES = {"sdml"}  # those that take a per-row margin on the positive (feedback_margin)
CHECKPOINT = "checkpoint.pt"
# On unit vectors -||a-b||^2 = 2cos(a, b) - 2, so SDML's scale 10 is a softmax temperature of 0.05
# over cosine similarities, the setting measured before this code was written (DESIGN.md).
DEFAULT_LOSS_PARAMS: dict[str, dict[str, Any]] = {"sdml": {"scale": 10.0}}


def _no_progress(stage: str, fraction: float, eta: float | None) -> None:
    return None


@dataclass(frozen=True)
class TrainConfig:
    loss: str = "sdml"
    loss_params: dict[str, Any] = field(default_factory=dict)
    batch_size: int = 256
    learning_rate: float = 1e-3
    max_steps: int = 20_000
    eval_every: int = 500
    patience: int = 4  # evaluations without improvement before stopping
    # Keep the weights with the best validation accuracy and stop early on it. A fine-tune
    # turns this off: its parent already scores well on member strings, so the curator
    # feedback it learns would never count as progress; the retraining gate judges it instead.
    select_best: bool = True
    max_minutes: float = 60.0
    validation_share: float = 0.05
    validation_max: int = 2_000
    negatives_per_positive: int = 4  # the paper's 4:1, for the pairwise losses
    hard_negative_share: float = 0.5
    typo_share: float = 0.1
    synonym_share: float = 0.1
    extra_words_share: float = 0.1
    feedback_share: float = 0.1
    # Fine-tuning: at least 1 - replay_share of the positive pairs come from curator feedback,
    # the rest replay taxonomy pairs so that what the parent knew is kept.
    replay_share: float = 1.0
    # Fine-tuning: the chance that a curator's input drawn as an anchor goes through the same
    # augmentations as a member string. Learnt only as typed, an input's own noise becomes
    # evidence for its group and the Extra Words test drifts; augmented, a few fewer
    # corrections are learnt (docs/benchmarks.md, Corrigibility).
    feedback_augment_share: float = 0.0
    # Fine-tuning: the share of the parent's (or the anchor's, see train_encoder) weights mixed
    # back into the result, weight by weight (weight-space interpolation, as in WiSE-FT). What
    # a fine-tune loses on the frozen suite shrinks faster than what it learnt: at 0.25, Typos
    # -0.4/-0.1 became 0.0-+0.1 and Extra Words rose, for 1.2-2.4 points of the corrections
    # (bench/finetune_drift.py --blends). No effect without a parent.
    keep_parent_share: float = 0.0
    # Fine-tuning: the loss keeps pulling a curator's input toward its group's string until it
    # is about this much cosine nearer than the in-batch negatives (its false match among them
    # when the batch carries it). The search lets the trigram term decide among members within
    # ``SearchConfig.lexical_window`` of the best cosine, and a corrected input usually shares
    # words with the wrong group: a correction learnt by less than the window is taken back.
    # Only the in-batch softmax (sdml) takes it.
    feedback_margin: float = 0.0
    seed: int = 0
    device: str = "auto"
    threads: int = 0  # 0: every core

    def __post_init__(self) -> None:
        check_field_types(self)
        if not isinstance(self.loss_params, dict):
            raise ConfigError("loss_params must be a JSON object")
        checks = [
            (self.loss in LOSSES, f"unknown loss {self.loss!r}; choose one of {sorted(LOSSES)}"),
            (2 <= self.batch_size <= 65_536, "batch_size must be between 2 and 65536"),
            (0 < self.learning_rate < 1, "learning_rate must be in (0, 1)"),
            (self.max_steps >= 0, "max_steps must not be negative (0: a pretrained model as is)"),
            (self.eval_every >= 1, "eval_every must be at least 1"),
            (self.patience >= 1, "patience must be at least 1"),
            (self.max_minutes > 0, "max_minutes must be positive"),
            (0 <= self.validation_share < 0.5, "validation_share must be in [0, 0.5)"),
            (self.negatives_per_positive >= 1, "negatives_per_positive must be at least 1"),
            (self.device in {"auto", "cpu", "cuda"}, "device must be auto, cpu or cuda"),
            (self.threads >= 0, "threads must not be negative"),
            (0 <= self.keep_parent_share < 1, "keep_parent_share must be in [0, 1)"),
            (0 <= self.feedback_margin <= 1, "feedback_margin must be in [0, 1], a cosine"),
            (
                self.feedback_margin == 0 or self.loss in MARGIN_LOSSES,
                f"feedback_margin needs a loss that takes one ({', '.join(sorted(MARGIN_LOSSES))})",
            ),
        ]
        for name in (
            "hard_negative_share",
            "typo_share",
            "synonym_share",
            "extra_words_share",
            "feedback_share",
            "replay_share",
            "feedback_augment_share",
        ):
            checks.append((0 <= getattr(self, name) <= 1, f"{name} must be in [0, 1]"))
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> TrainConfig:
        if not isinstance(raw, dict):
            raise ConfigError("a training config must be a JSON object")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ConfigError(f"unknown training option(s): {', '.join(unknown)}")
        try:
            return cls(**raw)
        except TypeError as exc:
            raise ConfigError(str(exc)) from None


@dataclass(frozen=True)
class FeedbackExample:
    text: str
    group_id: int
    label: bool  # True: text belongs to group_id; False: it does not
    member_text: str = ""  # the member it was matched with, when known


@dataclass
class TrainingData:
    train: list[tuple[int, str]]  # (group id, text)
    validation: list[tuple[int, str]]
    feedback: list[FeedbackExample]
    by_group: dict[int, list[str]]
    sha256: str
    # Groups the taxonomy calls related (O*NET "Related Occupations"): hard negatives from the
    # first step, before the model has an opinion of its own.
    related: dict[int, list[int]] = field(default_factory=dict)


def prepare_data(
    members: Sequence[tuple[int, str]],
    feedback: Sequence[FeedbackExample] = (),
    *,
    config: TrainConfig,
    related: Sequence[tuple[int, int]] = (),
) -> TrainingData:
    if len({group for group, _ in members}) < 2:
        raise ConfigError("training needs member strings in at least two groups")
    train, validation = split_members(
        list(members), validation_share=config.validation_share, seed=config.seed
    )
    validation = validation[: config.validation_max]
    by_group: dict[int, list[str]] = defaultdict(list)
    for group, text in train:
        by_group[group].append(text)
    digest = hashlib.sha256()
    for group, text in sorted(members):
        digest.update(f"{group}\t{text}\n".encode())
    for example in feedback:
        digest.update(f"{example.group_id}\t{example.text}\t{example.label}\n".encode())
    related_groups: dict[int, list[int]] = defaultdict(list)
    for a, b in related:
        if a in by_group and b in by_group:
            for group, other in ((a, b), (b, a)):  # relatedness works both ways
                if other not in related_groups[group]:
                    related_groups[group].append(other)
    return TrainingData(
        train=list(train),
        validation=list(validation),
        feedback=list(feedback),
        by_group=dict(by_group),
        sha256=digest.hexdigest(),
        related=dict(related_groups),
    )


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


class BatchSampler:
    """Builds batches of (anchor, positive[, negatives]) from the taxonomy and the feedback.

    Anchors are member strings drawn uniformly (so every string is seen), positives another
    string of the same group, or an augmented copy when the group has one string. Augmentations
    apply to the anchor: typos, a synonym swap, extra job-ad words. Hard negatives come from the
    groups the current model confuses with the anchor's (refreshed at every evaluation).
    """

    def __init__(
        self,
        data: TrainingData,
        config: TrainConfig,
        rng: random.Random,
        *,
        fine_tuning: bool = False,
    ) -> None:
        self.data, self.config, self.rng = data, config, rng
        self.feedback_share = (
            max(config.feedback_share, 1 - config.replay_share)
            if fine_tuning
            else config.feedback_share
        )
        self.groups = sorted(data.by_group)
        # The split's seed is fixed: another seed would put the test half's noise in training.
        self.extra_words = augment.ExtraWords("train")
        # Induced synonyms apply only inside the group that induced them, as in the paper.
        self.synonyms = augment.GroupSynonyms.from_taxonomy(
            data.by_group, augment.load_synonyms(augment.MANUAL_SYNONYMS_PATH)
        )
        self.confusable: dict[int, list[int]] = dict(data.related)
        self.positive_feedback = [
            f for f in data.feedback if f.label and f.group_id in data.by_group
        ]
        # Normalized once: batch() looks each drawn text up among the rejections.
        self.positive_keys = [normalize_text(f.text) for f in self.positive_feedback]
        self.negative_feedback = [f for f in data.feedback if not f.label]
        self.in_batch = config.loss not in PAIRWISE_LOSSES | TRIPLE_LOSSES
        # In-batch losses take their negatives from the other rows of the batch, so a false
        # match only teaches them something when the rejected member is another row's
        # positive: each judged text's rejected members (group, member string). Only members
        # the training data holds: a held-out curator member must not be learnt; and not a
        # group the text was also placed in, where the row would be no negative.
        placed = defaultdict(set)
        for key, f in zip(self.positive_keys, self.positive_feedback, strict=True):
            placed[key].add(f.group_id)
        members = {group: set(texts) for group, texts in data.by_group.items()}
        self.rejected: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for f in self.negative_feedback:
            key = normalize_text(f.text)
            known = f.member_text in members.get(f.group_id, ())
            if known and f.group_id not in placed.get(key, ()):
                self.rejected[key].append((f.group_id, f.member_text))
        # Texts a curator only rejected (no group given) are drawn among the feedback too,
        # each as a row of its own under a group id no real group has.
        # (Pairwise losses take false matches as negative pairs directly.)
        self.rejected_only = sorted(set(self.rejected) - set(placed)) if self.in_batch else []
        self._own_group = 0

    def augment(self, text: str, group: int) -> str:
        rng, c = self.rng, self.config
        if rng.random() < c.synonym_share:
            text = self.synonyms.apply(text, group, rng) or text
        if rng.random() < c.extra_words_share:
            text = self.extra_words.decorate(text, rng)
        if rng.random() < c.typo_share:
            text = augment.add_typos(text, rng)
        return text

    def _positive_pair(self, group: int | None = None) -> tuple[tuple[int, str, str], str | None]:
        """A (group, anchor, positive) row, and the normalized curator's text behind it if it
        is one."""
        rng = self.rng
        judged = len(self.positive_feedback) + len(self.rejected_only)
        if group is None and judged and rng.random() < self.feedback_share:
            pick = rng.randrange(judged)
            if pick >= len(self.positive_feedback):
                return self._rejected_only_pair(
                    self.rejected_only[pick - len(self.positive_feedback)]
                )
            example = self.positive_feedback[pick]
            text = example.text
            if rng.random() < self.config.feedback_augment_share:
                text = self.augment(text, example.group_id)
            member = example.member_text or rng.choice(self.data.by_group[example.group_id])
            return (example.group_id, text, member), self.positive_keys[pick]
        if group is None:
            group, anchor = rng.choice(self.data.train)
        else:
            anchor = rng.choice(self.data.by_group[group])
        others = self.data.by_group[group]
        positive = rng.choice(others) if len(others) > 1 else anchor
        return (group, self.augment(anchor, group), positive), None

    def _rejected_only_pair(self, text: str) -> tuple[tuple[int, str, str], str]:
        """A text with no known group: itself is its positive, under a group id no real group
        has (negative, new for each row), so no other row counts as its group."""
        self._own_group -= 1
        anchor = text
        if self.rng.random() < self.config.feedback_augment_share:
            anchor = self.augment(text, self._own_group)
        return (self._own_group, anchor, text), text

    def _rejected_member_pair(self, group: int, member: str) -> tuple[int, str, str]:
        """A row whose positive is ``member``: its anchor another string of its group, or an
        augmented copy of it."""
        others = [text for text in self.data.by_group[group] if text != member]
        anchor = self.rng.choice(others) if others else member
        return group, self.augment(anchor, group), member

    def _negative_text(self, group: int) -> str:
        rng = self.rng
        confusable = self.confusable.get(group)
        if confusable and rng.random() < self.config.hard_negative_share:
            other = rng.choice(confusable)
        else:
            other = rng.choice(self.groups)
            while other == group and len(self.groups) > 1:
                other = rng.choice(self.groups)
        return rng.choice(self.data.by_group[other])

    def batch(self) -> dict[str, Any]:
        """Texts and targets for one step; the loss decides which parts it uses."""
        size = self.config.batch_size
        drawn = [self._positive_pair() for _ in range(size)]
        pairs = [row for row, _ in drawn]
        # Whether each row is a curator's text; a row replaced below is not any more.
        curator = [key is not None for _, key in drawn]
        if self.in_batch:
            for i in range(1, size, 2):
                rejected = self.rejected.get(drawn[i - 1][1])
                if rejected:
                    # The member a curator rejected for row i - 1's text becomes row i's
                    # positive, so it is a negative column of row i - 1: a false match as a
                    # hard negative for in-batch losses. The row counts in the feedback share.
                    pairs[i] = self._rejected_member_pair(*self.rng.choice(rejected))
                    curator[i] = False
                    continue
                # Else put groups the model confuses in one batch, so that the other rows are
                # hard negatives for each other.
                neighbours = self.confusable.get(pairs[i - 1][0])
                if neighbours and self.rng.random() < self.config.hard_negative_share:
                    pairs[i] = self._positive_pair(self.rng.choice(neighbours))[0]
                    curator[i] = False
        batch: dict[str, Any] = {
            "groups": [g for g, _, _ in pairs],
            "anchors": [a for _, a, _ in pairs],
            "positives": [p for _, _, p in pairs],
        }
        if self.config.feedback_margin > 0:
            batch["margins"] = [self.config.feedback_margin if c else 0.0 for c in curator]
        if self.config.loss in PAIRWISE_LOSSES | TRIPLE_LOSSES:
            per = 1 if self.config.loss in TRIPLE_LOSSES else self.config.negatives_per_positive
            negatives = []
            for group, anchor, _ in pairs:
                for _ in range(per):
                    if self.negative_feedback and self.rng.random() < self.config.feedback_share:
                        example = self.rng.choice(self.negative_feedback)
                        negatives.append((example.text, example.member_text or anchor))
                    else:
                        negatives.append((anchor, self._negative_text(group)))
            batch["negatives"] = negatives
        return batch

    def refresh_confusable(self, vectors: np.ndarray, top: int = 10) -> None:
        """Nearest other groups by the mean vector of their strings, under the current model;
        ``vectors`` are the training strings encoded by it."""
        index = {group: i for i, group in enumerate(self.groups)}
        centroids = np.zeros((len(self.groups), vectors.shape[1]), dtype=np.float32)
        np.add.at(centroids, [index[g] for g, _ in self.data.train], vectors)
        centroids /= np.linalg.norm(centroids, axis=1, keepdims=True).clip(1e-6)
        similarity = centroids @ centroids.T  # (G, G)
        np.fill_diagonal(similarity, -np.inf)
        nearest = np.argsort(-similarity, axis=1)[:, :top]
        self.confusable = {
            group: list(dict.fromkeys([self.groups[j] for j in nearest[i]]
                                      + self.data.related.get(group, [])))
            for i, group in enumerate(self.groups)
        }  # fmt: skip


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


class RowSparseAdam(torch.optim.SparseAdam):
    """SparseAdam's update, computed on the rows a step's gradient touches as dense tensors.

    torch's SparseAdam coalesces the gradient, then reads and writes the moment estimates
    through sparse tensors (two ``sparse_mask`` and three sparse additions). On the n-gram
    table's gradient of a 512-pair batch (about 84,000 rows, 21,000 of them distinct) that was
    44 ms of a step of about 100; summing the rows with ``index_add_`` and updating the gathered
    rows is 18 ms (docs/benchmarks.md, "Fine-tune throughput"). With a float learning rate the
    arithmetic is SparseAdam's, operation for operation; only the order in which a row's
    duplicate gradients are summed may differ. Same state (``step`` an int, ``exp_avg``,
    ``exp_avg_sq``), so either's state dict loads into the other: a checkpoint written before
    this class resumes with it.
    """

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            # Checked before any update, so a bad gradient leaves every parameter as it was.
            for param in group["params"]:
                grad = param.grad
                if grad is not None and not (grad.is_sparse and grad.sparse_dim() == 1):
                    raise RuntimeError(
                        "RowSparseAdam needs sparse gradients of whole rows (an embedding "
                        "table's); use Adam for dense ones"
                    )
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                state = self.state[param]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(param)
                    state["exp_avg_sq"] = torch.zeros_like(param)
                state["step"] += 1  # as SparseAdam: counted even when no row was touched
                grad = -param.grad if group.get("maximize", False) else param.grad
                _row_adam_update(param, grad, state, group)
        return loss


def _row_adam_update(
    param: torch.Tensor, grad: torch.Tensor, state: dict[str, Any], group: dict[str, Any]
) -> None:
    """One Adam step on the rows of ``param`` that ``grad`` (sparse, a row per occurrence,
    repeats allowed) touches; ``state`` holds the moments, ``group`` the hyperparameters."""
    rows, position = torch.unique(grad._indices()[0], return_inverse=True)
    if rows.numel() == 0:
        return
    values = grad._values()  # (nnz, D), a row per occurrence
    summed = values.new_zeros((len(rows), *values.shape[1:])).index_add_(0, position, values)
    beta1, beta2 = group["betas"]
    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
    # old <- old + (1 - b) * (new - old), in SparseAdam's order of operations
    old_exp_avg = exp_avg.index_select(0, rows)
    exp_avg_update = summed.sub(old_exp_avg).mul_(1 - beta1)
    old_exp_avg_sq = exp_avg_sq.index_select(0, rows)
    exp_avg_sq_update = summed.pow_(2).sub_(old_exp_avg_sq).mul_(1 - beta2)
    numer = exp_avg_update.add_(old_exp_avg)
    new_exp_avg_sq = exp_avg_sq_update.add_(old_exp_avg_sq)
    exp_avg.index_copy_(0, rows, numer)
    exp_avg_sq.index_copy_(0, rows, new_exp_avg_sq)
    # Both were copied above, so they may be overwritten in place from here on.
    denom = new_exp_avg_sq.sqrt_().add_(group["eps"])
    step = state["step"]
    step_size = float(group["lr"]) * math.sqrt(1 - beta2**step) / (1 - beta1**step)
    param.index_add_(0, rows, numer.div_(denom).mul_(-step_size))


class _Optimizer:
    """Adam for dense parameters, SparseAdam's update for embedding tables with sparse
    gradients (``RowSparseAdam``)."""

    def __init__(self, encoder: NeuralEncoder, loss: torch.nn.Module, lr: float) -> None:
        sparse = {
            id(p)
            for m in encoder.modules()
            if isinstance(m, torch.nn.Embedding | torch.nn.EmbeddingBag) and m.sparse
            for p in m.parameters()
        }
        params = list(encoder.parameters()) + list(loss.parameters())
        self.dense = [p for p in params if id(p) not in sparse]
        sparse_params = [p for p in params if id(p) in sparse]
        self.optimizers = [torch.optim.Adam(self.dense, lr=lr)]
        if sparse_params:
            self.optimizers.append(RowSparseAdam(sparse_params, lr=lr))

    def zero_grad(self, set_to_none: bool = True) -> None:
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        torch.nn.utils.clip_grad_norm_(self.dense, 5.0)  # clipping needs dense gradients
        for optimizer in self.optimizers:
            optimizer.step()

    def state_dict(self) -> list[dict]:
        return [optimizer.state_dict() for optimizer in self.optimizers]

    def load_state_dict(self, states: list[dict]) -> None:
        for optimizer, state in zip(self.optimizers, states, strict=True):
            optimizer.load_state_dict(state)


def choose_device(name: str) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' was asked for but CUDA is not available")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def _set_threads(threads: int) -> None:
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
    progress: Progress = _no_progress,
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
        _set_threads(config.threads)
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
    optimizer = _Optimizer(encoder, loss, config.learning_rate)
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
        if step % 20 == 0:
            elapsed = time.monotonic() - started
            eta = min(
                elapsed / step * (config.max_steps - step),
                max(0.0, deadline - time.monotonic()),
            )
            progress("train", step / config.max_steps, eta)

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


# A model spec is what `manage.py train --config` reads: {"encoder": {...}, "training": {...}}.
DEFAULT_SPEC: dict[str, Any] = {"encoder": {"kind": "char_ngram_tfidf"}, "training": {}}
# Encoder kinds that know language before any training, so that 0 training steps serve.
PRETRAINED_KINDS = {"transformer"}
# Real vacancy titles (JobBERT dev-unseen, docs/benchmarks.md "Real inputs") score lower with
# the trigram term than by the tower alone, so the tower's specs turn it off.
_TOWER_SEARCH = {"lexical_weight": 0.0}
# The pretrained tower as it comes: what a new taxonomy serves while its first training runs.
PRETRAINED_SPEC: dict[str, Any] = {
    "encoder": {"kind": "transformer"},
    "training": {"max_steps": 0},
    "search": _TOWER_SEARCH,
}
# The tower trained on the taxonomy: in-batch softmax at temperature 0.05 (scale 20), Adam at
# 3e-5, a third of the anchors augmented. On an H200 it reaches its best JobBERT score within
# 1,500 steps (bench/results/tower_training_gpu.json); 2 CPU cores take about 3 s a step, so
# the 40 minutes (inside the task's hour with the encoding of every member, and leaving the
# student's 15 within the hour a new taxonomy's training may take) reach about 800.
TOWER_SPEC: dict[str, Any] = {
    "encoder": {"kind": "transformer"},
    "training": {
        "loss": "sdml",
        "loss_params": {"scale": 20.0},
        "batch_size": 128,
        "learning_rate": 3e-5,
        "max_steps": 1500,
        "max_minutes": 40.0,
        "eval_every": 500,
        "patience": 4,
        "typo_share": 0.1,
        "synonym_share": 0.1,
        "extra_words_share": 0.2,
    },
    "search": _TOWER_SEARCH,
}
# The fast student distilled from the taxonomy's live tower (models_app/siamese/distill.py):
# on JobBERT dev-unseen it scores within a point of its teacher at about 100 times the encoding
# speed (docs/benchmarks.md, "A fast student"). It takes the tower's 384 dimensions.
STUDENT_SPEC: dict[str, Any] = {
    "encoder": {"kind": "ngram_bag", "buckets": 262144, "embedding_dim": 256, "output_dim": 384},
    "distill": {"teacher": "live", "max_minutes": 15.0},
    "search": {"lexical_weight": 0.0},
}
# By name, for `manage.py train --spec`.
NAMED_SPECS: dict[str, dict[str, Any]] = {
    "default": DEFAULT_SPEC,
    "pretrained": PRETRAINED_SPEC,
    "tower": TOWER_SPEC,
    "student": STUDENT_SPEC,
}


def parse_search_config(raw: dict[str, Any] | None) -> Any:
    """The ``search`` part of a spec (a ``SearchConfig``); a version stored without one gets
    today's default. Imported here: the search needs FAISS, training does not."""
    from models_app.siamese.search import SearchConfig

    raw = (raw or {}).get("search", {})
    if not isinstance(raw, dict):
        raise ConfigError("search must be a JSON object")
    unknown = sorted(set(raw) - {f.name for f in dataclasses.fields(SearchConfig)})
    if unknown:
        raise ConfigError(f"unknown search option(s): {', '.join(unknown)}")
    return SearchConfig(**raw)


def parse_distill_config(raw: dict[str, Any] | None) -> Any:
    """The ``distill`` part of a spec (a ``DistillConfig``), or None: the model is trained on
    the taxonomy's pairs instead. ``teacher`` names where the teacher comes from: ``live``,
    the taxonomy's live model."""
    from models_app.siamese.distill import DistillConfig

    section = (raw or {}).get("distill")
    if section is None:
        return None
    if not isinstance(section, dict):
        raise ConfigError("distill must be a JSON object")
    # teacher_version is what a stored version records of its teacher, not an option.
    options = {k: v for k, v in section.items() if k not in ("teacher", "teacher_version")}
    if section.get("teacher", "live") != "live":
        raise ConfigError("distill.teacher must be 'live' (the taxonomy's live model)")
    unknown = sorted(set(options) - {f.name for f in dataclasses.fields(DistillConfig)})
    if unknown:
        raise ConfigError(f"unknown distill option(s): {', '.join(unknown)}")
    try:
        return DistillConfig(**options)
    except TypeError as exc:
        raise ConfigError(str(exc)) from None


def parse_model_spec(raw: dict[str, Any] | None) -> tuple[dict[str, Any], TrainConfig]:
    """Check a spec whole before any work starts; returns (encoder config, training config)."""
    raw = DEFAULT_SPEC if raw is None or raw == {} else raw
    if not isinstance(raw, dict):
        raise ConfigError("a model spec must be a JSON object with 'encoder' and 'training'")
    unknown = sorted(set(raw) - {"encoder", "training", "search", "distill"})
    if unknown:
        raise ConfigError(
            f"unknown key(s) in the model spec: {', '.join(unknown)}; expected 'encoder', "
            "'training', 'search' and 'distill'"
        )
    parse_search_config(raw)
    parse_distill_config(raw)
    encoder = raw.get("encoder", DEFAULT_SPEC["encoder"])
    encoder_config = parse_config(encoder)
    # A pretrained tower trains with its own defaults: the n-gram models' learning rate would
    # wipe out what it knows in a few steps.
    defaults = TOWER_SPEC["training"] if encoder_config.kind in PRETRAINED_KINDS else {}
    training = TrainConfig.from_dict({**defaults, **raw.get("training", {})})
    if training.max_steps == 0 and encoder_config.kind not in PRETRAINED_KINDS:
        raise ConfigError(
            f"max_steps 0 serves a model as it comes, which only a pretrained encoder can "
            f"({', '.join(sorted(PRETRAINED_KINDS))}); {encoder_config.kind} starts untrained"
        )
    return dataclasses.asdict(encoder_config), training
