"""A fine-tune's recipe: the live version's spec with a short budget, replay of the taxonomy,
curator inputs augmented, part of the live weights kept, and how often new verdicts are drawn.

The figures behind each constant are in docs/benchmarks.md and the benchmarks named beside it.
"""

from __future__ import annotations

import dataclasses
import math

from django.conf import settings

from models_app.models import ModelVersion
from models_app.siamese.sampling import FeedbackExample
from models_app.siamese.specs import MARGIN_LOSSES, TrainConfig
from models_app.siamese.text import comparison_key
from models_app.siamese.title_tower import TitleTowerRecipe

# Half of a fine-tune's positive pairs come from curator feedback, half replay the taxonomy's
# own pairs, so the corrections are learned without forgetting what the parent knew.
FINETUNE_REPLAY_SHARE = 0.5
# Curator inputs go through the augmentations member strings do (typos, a synonym, job-ad
# words): learnt only as typed, their noise costs the frozen Extra Words test enough for the
# gate to reject the candidate (docs/decisions/finetune-recipe.md).
FINETUNE_FEEDBACK_AUGMENT_SHARE = 1.0
# A fine-tune's weights keep this share of the live version's (TrainConfig.keep_parent_share):
# each promotion's loss on the frozen suite counts against the gate's drift budget, and the
# blend keeps the frozen tests level for a few corrections less
# (docs/decisions/finetune-recipe.md). A manual fine-tune from a version inherits its spec,
# this share too.
FINETUNE_KEEP_PARENT_SHARE = 0.25
# A curator's input is pulled until it is nearer its group's string than the in-batch negatives
# (its false match among them when the batch carries it) by about this much cosine
# (TrainConfig.feedback_margin): more than the search's trigram window
# (SearchConfig.lexical_window, 0.03), inside which string overlap with the wrong group would
# take the correction back. Fine-tunes of a loss without margins go without.
FINETUNE_FEEDBACK_MARGIN = 0.05
# A fine-tune's first phase repeats the verdicts since the live version until they are about
# as many as all earlier ones, but at most this many times: a run started by the clock on a
# handful of new verdicts must not spend half its feedback on them.
FINETUNE_FRESH_MAX_REPEATS = 8
# A fine-tune on more new verdicts than settings.SIAMWEB_FINETUNE_BUDGET_VERDICTS trains
# proportionally longer, up to this factor. On a fixed budget each new verdict is drawn less
# often the more there are: after a rejected round the next run learns two rounds' verdicts, and
# a fixed budget learnt fewer of them (docs/decisions/finetune-recipe.md). The cap bounds how
# long a backlog keeps the training worker busy.
FINETUNE_BUDGET_GROWTH_CAP = 1.5
# The share of a fine-tune's time budget that catches up on the held-out verdicts once the
# gate has measured them (see finetune_execute).
FINETUNE_CATCH_UP_SHARE = 0.25


def finetune_minutes(new_verdicts: int) -> float:
    """A fine-tune's time budget: ``SIAMWEB_FINETUNE_MAX_MINUTES`` for up to
    ``SIAMWEB_FINETUNE_BUDGET_VERDICTS`` new verdicts, in proportion beyond that, at most
    ``FINETUNE_BUDGET_GROWTH_CAP`` times as long."""
    growth = new_verdicts / settings.SIAMWEB_FINETUNE_BUDGET_VERDICTS
    return settings.SIAMWEB_FINETUNE_MAX_MINUTES * min(FINETUNE_BUDGET_GROWTH_CAP, max(1.0, growth))


def finetune_spec(parent: ModelVersion, overrides: dict, *, new_verdicts: int = 0) -> dict:
    """The parent's spec with a short training budget for ``new_verdicts`` (see
    ``finetune_minutes``); ``overrides`` may change its training, the budget too. The verdicts
    are learnt by the pairs sampler with replay and augmented curator inputs, or, when
    ``overrides`` asks a tower's run for ``finetune_recipe`` "titles", by the title recipe
    (``siamese/tower_finetune.py``)."""
    spec = {key: dict(value) for key, value in parent.config.items()}
    # A student was distilled once; its fine-tunes learn the verdicts like any trained model.
    spec.pop("distill", None)
    training = spec.setdefault("training", {})
    training["max_minutes"] = finetune_minutes(new_verdicts)
    if not training.get("max_steps", TrainConfig.max_steps):
        # A pretrained version served as it came (0 steps): its fine-tunes train, by the clock.
        training["max_steps"] = TrainConfig.max_steps
    training["select_best"] = False
    training["keep_parent_share"] = FINETUNE_KEEP_PARENT_SHARE
    requested = overrides.get("training", {})
    # Every encoder learns its verdicts by the pairs sampler unless a run asks for the title
    # recipe (a tower only): on real titles the title recipe did no better from the wheel's
    # MiniLM and cost the shipped title tower a point (docs/decisions/finetune-recipe.md).
    training["finetune_recipe"] = requested.get("finetune_recipe", TrainConfig.finetune_recipe)
    if training["finetune_recipe"] == "pairs":
        training["replay_share"] = FINETUNE_REPLAY_SHARE
        training["feedback_augment_share"] = FINETUNE_FEEDBACK_AUGMENT_SHARE
    else:
        training["batch_size"] = TitleTowerRecipe.batch_size  # as the title tower trained
    training.update(requested)
    if "feedback_margin" in requested:
        pass  # an admin's own value is kept
    elif training.get("finetune_recipe", TrainConfig.finetune_recipe) == "titles":
        training.pop("feedback_margin", None)  # the pairs sampler's, which it does not use
    else:
        # By the loss the run will train with: an override may change it, and a parent
        # fine-tuned under sdml carries a margin another loss cannot take.
        if training.get("loss", TrainConfig.loss) in MARGIN_LOSSES:
            training["feedback_margin"] = FINETUNE_FEEDBACK_MARGIN
        else:
            training.pop("feedback_margin", None)
    return spec


def share_of_budget(training: TrainConfig, share: float) -> TrainConfig:
    """The training config with ``share`` of its time and of its steps (a GPU run may stop on
    steps before time)."""
    return dataclasses.replace(
        training,
        max_minutes=training.max_minutes * share,
        max_steps=max(1, math.ceil(training.max_steps * share)),
    )


def half_fresh(
    *,
    fresh: list[FeedbackExample],
    rest: list[FeedbackExample],
    max_repeats: int | None = None,
) -> list[FeedbackExample]:
    """Every pair, the ``fresh`` ones repeated until their judged texts are about as many as
    the rest's (at least once, at most ``max_repeats`` times). Texts, not pairs: a reassign
    gives two pairs and a confirm one, and the sampler draws a text's rejections through its
    positive pair. The rest stay in, or training would wear off what they taught."""
    fresh_texts = len({comparison_key(f.text) for f in fresh})
    rest_texts = len({comparison_key(f.text) for f in rest})
    repeats = max(1, round(rest_texts / fresh_texts)) if fresh_texts else 1
    if max_repeats is not None:
        repeats = min(repeats, max_repeats)
    return fresh * repeats + rest


def catch_up_feedback(
    feedback: list[FeedbackExample], held_out: frozenset[str]
) -> list[FeedbackExample]:
    """Every pair, the held-out verdicts' repeated to about half of them: the catch-up phase
    is short, and the others were learnt in the first phase already."""
    return half_fresh(
        fresh=[f for f in feedback if comparison_key(f.text) in held_out],
        rest=[f for f in feedback if comparison_key(f.text) not in held_out],
    )
