"""Model specs: what a spec's "encoder", "training", "search" and "distill" sections may say,
checked into configs (``TrainConfig``, the search and distillation configs), and the named
specs the product builds with (the pretrained tower as it comes, the tower trained on a
taxonomy, the fast student distilled from it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from models_app.siamese.configs import ConfigError, check_field_types
from models_app.siamese.encoders import parse_config
from models_app.siamese.losses import LOSSES

PAIRWISE_LOSSES = {"contrastive", "hybrid"}
TRIPLE_LOSSES = {"s2net"}
MARGIN_LOSSES = {"sdml"}  # those that take a per-row margin on the positive (feedback_margin)
FINETUNE_RECIPES = ("pairs", "titles")
# On unit vectors -||a-b||^2 = 2cos(a, b) - 2, so SDML's scale 10 is a softmax temperature of 0.05
# over cosine similarities, the setting measured before this code was written (DESIGN.md).
DEFAULT_LOSS_PARAMS: dict[str, dict[str, Any]] = {"sdml": {"scale": 10.0}}


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
    # corrections are learnt (docs/decisions/finetune-recipe.md).
    feedback_augment_share: float = 0.0
    # Fine-tuning: the share of the parent's (or the anchor's, see train_encoder) weights mixed
    # back into the result, weight by weight (weight-space interpolation, as in WiSE-FT): what
    # a fine-tune loses on the frozen suite shrinks faster than what it learnt
    # (docs/decisions/finetune-recipe.md). No effect without a parent.
    keep_parent_share: float = 0.0
    # Fine-tuning: the loss keeps pulling a curator's input toward its group's string until it
    # is about this much cosine nearer than the in-batch negatives (its false match among them
    # when the batch carries it). The search lets the trigram term decide among members within
    # ``SearchConfig.lexical_window`` of the best cosine, and a corrected input usually shares
    # words with the wrong group: a correction learnt by less than the window is taken back.
    # Only the in-batch softmax (sdml) takes it.
    feedback_margin: float = 0.0
    # Fine-tuning: ``pairs``, the pairs sampler above; ``titles``, a tower learns its verdicts
    # by the recipe that taught it real titles (``tower_finetune.py``).
    finetune_recipe: str = "pairs"
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
                self.finetune_recipe in FINETUNE_RECIPES,
                f"finetune_recipe must be one of {', '.join(FINETUNE_RECIPES)}",
            ),
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
class DistillConfig:
    batch_size: int = 512
    learning_rate: float = 1e-3
    max_steps: int = 100_000
    max_minutes: float = 30.0
    # Augmented copies of each taxonomy string added to the texts (their teacher vectors too).
    augmented_copies: int = 2
    # Softmax temperature of the in-batch term: 0.05, as the training loss's scale of 20.
    temperature: float = 0.05
    ranking_weight: float = 1.0
    seed: int = 0
    device: str = "auto"
    threads: int = 0

    def __post_init__(self) -> None:
        check_field_types(self)
        checks = [
            (2 <= self.batch_size <= 65_536, "batch_size must be between 2 and 65536"),
            (0 < self.learning_rate < 1, "learning_rate must be in (0, 1)"),
            (self.max_steps >= 1, "max_steps must be at least 1"),
            (self.max_minutes > 0, "max_minutes must be positive"),
            (0 <= self.augmented_copies <= 10, "augmented_copies must be between 0 and 10"),
            (0 < self.temperature <= 1, "temperature must be in (0, 1]"),
            (self.ranking_weight >= 0, "ranking_weight must not be negative"),
            (self.device in {"auto", "cpu", "cuda"}, "device must be auto, cpu or cuda"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)


# A model spec is what `manage.py train --config` reads: {"encoder": {...}, "training": {...}}.
DEFAULT_SPEC: dict[str, Any] = {"encoder": {"kind": "char_ngram_tfidf"}, "training": {}}
# Encoder kinds that know language before any training, so that 0 training steps serve.
PRETRAINED_KINDS = {"transformer"}
# Real vacancy titles score lower with the trigram term than by the tower alone, so the tower's
# specs turn it off (docs/decisions/no-trigram-for-towers.md).
_TOWER_SEARCH = {"lexical_weight": 0.0}
# The pretrained tower as it comes: what a new taxonomy serves while its first training runs.
PRETRAINED_SPEC: dict[str, Any] = {
    "encoder": {"kind": "transformer"},
    "training": {"max_steps": 0},
    "search": _TOWER_SEARCH,
}
# The tower trained on the taxonomy: in-batch softmax at temperature 0.05 (scale 20), Adam at
# 3e-5, a third of the anchors augmented. The step count is where a GPU reaches its best score
# on real titles; the 40 minutes keep a CPU-only training inside the task's hour with the
# encoding of every member and the student's 15 (docs/decisions/tower-and-student.md).
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
# on real titles it scores about as its teacher does and encodes far faster
# (docs/decisions/tower-and-student.md). It takes its teacher's dimensions (``_student_fit``): a
# tower's 384; the shipped O*NET student (bench/onet_student.py) learns the title tower's first
# 128 principal directions.
STUDENT_SPEC: dict[str, Any] = {
    "encoder": {"kind": "ngram_bag", "buckets": 262144, "embedding_dim": 256},
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


def parse_distill_config(raw: dict[str, Any] | None) -> DistillConfig | None:
    """The ``distill`` part of a spec (a ``DistillConfig``), or None: the model is trained on
    the taxonomy's pairs instead. ``teacher`` names where the teacher comes from: ``live``,
    the taxonomy's live model."""
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
    if training.finetune_recipe == "titles" and encoder_config.kind not in PRETRAINED_KINDS:
        raise ConfigError(
            f"finetune_recipe 'titles' trains a pretrained tower "
            f"({', '.join(sorted(PRETRAINED_KINDS))}); {encoder_config.kind} takes 'pairs'"
        )
    if training.max_steps == 0 and encoder_config.kind not in PRETRAINED_KINDS:
        raise ConfigError(
            f"max_steps 0 serves a model as it comes, which only a pretrained encoder can "
            f"({', '.join(sorted(PRETRAINED_KINDS))}); {encoder_config.kind} starts untrained"
        )
    return dataclasses.asdict(encoder_config), training
