"""Training data: members and curator feedback turned into a ``TrainingData``, and the sampler
that draws batches of (anchor, positive[, negatives]) from it.
"""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from models_app.siamese.augment.extra_words import ExtraWords
from models_app.siamese.augment.synonyms import MANUAL_SYNONYMS_PATH, GroupSynonyms, load_synonyms
from models_app.siamese.augment.typos import add_typos
from models_app.siamese.configs import ConfigError
from models_app.siamese.evaluation import split_members
from models_app.siamese.specs import PAIRWISE_LOSSES, TRIPLE_LOSSES, TrainConfig
from models_app.siamese.text import comparison_key


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
        sha256=training_data_digest(members, feedback),
        related=dict(related_groups),
    )


def training_data_digest(
    members: Sequence[tuple[int, str]], feedback: Sequence[FeedbackExample]
) -> str:
    """What a model was trained on, as a digest: its members in any order, its feedback in order."""
    digest = hashlib.sha256()
    for group, text in sorted(members):
        digest.update(f"{group}\t{text}\n".encode())
    for example in feedback:
        digest.update(f"{example.group_id}\t{example.text}\t{example.label}\n".encode())
    return digest.hexdigest()


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
        self.extra_words = ExtraWords("train")
        # Induced synonyms apply only inside the group that induced them, as in the paper.
        self.synonyms = GroupSynonyms.from_taxonomy(
            data.by_group, load_synonyms(MANUAL_SYNONYMS_PATH)
        )
        self.confusable: dict[int, list[int]] = dict(data.related)
        self.positive_feedback = [
            f for f in data.feedback if f.label and f.group_id in data.by_group
        ]
        # Normalized once: batch() looks each drawn text up among the rejections.
        self.positive_keys = [comparison_key(f.text) for f in self.positive_feedback]
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
            key = comparison_key(f.text)
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
            text = add_typos(text, rng)
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
