"""A tower's fine-tune on curators' verdicts, by the recipe that taught it real titles.

A verdict is a real title labelled with a group, the same material the title tower learnt from
(``title_tower.py``), so a tower learns verdicts the same way: batches of distinct groups, half
the taxonomy's member strings pulled to another member of their group (what it knew is kept) and
half the judged titles as typed, each pulled to a member of its group (the curator's member when
the verdict names one); a false match sits in its title's batch as a negative. The word
embeddings stay as they are. The result keeps a share of the parent's weights, as every
fine-tune does (``TrainConfig.keep_parent_share``).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence

from models_app.siamese.configs import ConfigError
from models_app.siamese.progress import Progress, no_progress
from models_app.siamese.sampling import FeedbackExample
from models_app.siamese.specs import TrainConfig
from models_app.siamese.title_tower import LabelledTaxonomy, TitleTowerRecipe, train_title_tower
from models_app.siamese.towers import TransformerEncoder
from models_app.siamese.train import PROGRESS_EVERY_SECONDS, TrainResult, blend_weights

# Losses kept in the run's history: one point every this many steps.
HISTORY_EVERY = 20


def verdicts_as_titles(
    members: Sequence[tuple[int, str]], feedback: Sequence[FeedbackExample]
) -> LabelledTaxonomy:
    """The taxonomy's members and the verdicts as the title recipe's material: each text placed
    in a group a title of it, each rejected member a false match of its text. A text only
    rejected (no group given) teaches nothing here: it has no group to be pulled to."""
    by_group: dict[str, list[str]] = {}
    for group, text in members:
        by_group.setdefault(str(group), []).append(text)
    titles, false_matches = [], []
    for example in feedback:
        key = str(example.group_id)
        if key not in by_group:
            continue
        if example.label:
            titles.append((example.text, key))
        elif example.member_text:
            false_matches.append((example.text, key, example.member_text))
    return LabelledTaxonomy("verdicts", by_group, titles, false_matches)


def tower_finetune(
    parent: TransformerEncoder,
    members: Sequence[tuple[int, str]],
    feedback: Sequence[FeedbackExample],
    config: TrainConfig,
    *,
    anchor: TransformerEncoder | None = None,
    progress: Progress = no_progress,
) -> TrainResult:
    """``parent`` trained for ``config.max_minutes`` (at most ``config.max_steps`` steps) on
    ``feedback`` beside ``members``, then
    blended toward ``anchor`` (default: ``parent``) by ``config.keep_parent_share``; ``parent``
    itself is left as it was. The result's ``trained_encoder`` is the weights before the blend."""
    started = time.monotonic()
    material = verdicts_as_titles(members, feedback)
    if not material.titles:
        raise ConfigError("a tower's fine-tune needs at least one verdict that places a text")
    # The title tower's warm-up and temperature at the spec's rate and batch, by the clock: the
    # steps are a cap a CPU's minutes reach long before.
    recipe = TitleTowerRecipe(
        steps=max(1, config.max_steps),
        learning_rate=config.learning_rate,
        batch_size=config.batch_size,
        max_seconds=config.max_minutes * 60,
        clock_schedule=True,
        seed=config.seed,
        threads=config.threads,
        max_length=parent.config.max_length,
    )
    budget = recipe.max_seconds
    history: list[dict[str, float]] = []
    reported_at = -math.inf

    def report(step: int, loss: float) -> None:
        nonlocal reported_at
        if step % HISTORY_EVERY == 0:
            history.append({"step": float(step), "loss": loss})
        now = time.monotonic()
        if now - reported_at >= PROGRESS_EVERY_SECONDS:
            reported_at = now
            spent = now - started
            progress("train", min(1.0, spent / budget), max(0.0, budget - spent))

    progress("train", 0.0, budget)
    trained = copy.deepcopy(parent)
    outcome = train_title_tower(trained.model, [material], recipe, report)
    trained.eval()
    result = trained
    if config.keep_parent_share > 0:
        result = copy.deepcopy(trained).eval()
        blend_weights(result, anchor or parent, keep=config.keep_parent_share)
    progress("train", 1.0, 0.0)
    return TrainResult(
        encoder=result,
        metrics={"steps": float(outcome.steps), "resumed_from_step": 0.0},
        history=history,
        steps=outcome.steps,
        stopped_because="max_steps" if outcome.steps >= recipe.steps else "time budget",
        device="cpu",
        seconds=time.monotonic() - started,
        trained_encoder=trained,
    )
