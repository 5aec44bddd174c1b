"""The learnt ranker: a linear model over the candidates' features (plus, from the starter, a
fixed residual network: ``residual``), fitted listwise on verdicts and calibrated into the
probability a curator sees.

A verdict is a labelled ranking: the group a curator chose is right, the others were not. The
weights are fitted listwise (softmax cross-entropy over a text's candidates), pulled toward the
prior ranking so that a few verdicts move them a little and many move them far. The probability
is a softmax over the candidates' scores and a "none of these" logit, calibrated on verdicts the
weights were not fitted on (cross-fitting).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.configs import ConfigError
from models_app.siamese.ranker.candidates import Candidates
from models_app.siamese.ranker.features import FEATURE_SET, FEATURES
from models_app.siamese.ranker.residual import (
    ResidualConfig,
    ResidualNet,
    fit_residual,
    padded_lists,
)

# Clip standardized features: a value far outside what the fit saw cannot swing a score.
_CLIP = 8.0


@dataclass(frozen=True)
class RankingExample:
    """A verdict as a labelled ranking: the candidates the text had, and where it belongs
    (None: "none of these", the right group is not among the groups offered). ``added``: the
    right group is the last candidate only because the fit added it (no matcher proposed it):
    the weights learn from it, but what it says of the served ranking is a miss."""

    candidates: Candidates
    group_id: int | None
    added: bool = False

    @property
    def target(self) -> int:
        """The right group's row among the candidates; -1 when it is not one of them."""
        if self.group_id is None:
            return -1
        rows = np.flatnonzero(self.candidates.groups == self.group_id)
        return int(rows[0]) if len(rows) else -1


@dataclass
class LinearRanker:
    """``score = standardized features · weights`` (plus the ``residual`` network's score, kept
    fixed from the starter); ``probability`` of each candidate = a softmax over
    ``score / temperature`` and a "none of these" logit, once calibrated.

    The weights only rank a text's candidates against each other (a listwise fit cannot see
    what all of them share), so whether any of them is right is the "none of these" logit's
    to say, and how sure the ranking is the temperature's: ``miss_logit + miss_slope * s`` and
    ``temperature * exp(temperature_slope * s)``, with ``s`` the best similarity any candidate
    has (a text like nothing in the taxonomy is likely none of them, or any of them)."""

    feature_names: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    temperature: float | None = None
    miss_logit: float | None = None
    miss_slope: float = 0.0
    temperature_slope: float = 0.0
    fitted_on: int = 0  # verdicts the weights learnt from; 0: the prior
    metrics: dict = field(default_factory=dict)
    residual: ResidualNet | None = None

    @property
    def calibrated(self) -> bool:
        return self.temperature is not None and self.miss_logit is not None

    @classmethod
    def prior(cls, *, description_weight: float = 0.0) -> LinearRanker:
        """The ranking before any verdict: a group's best member, plus ``description_weight``
        times its description's cosine where the encoder knows language."""
        weights = np.zeros(len(FEATURES))
        weights[FEATURES.index("best")] = 1.0
        weights[FEATURES.index("description")] = description_weight
        return cls(FEATURES, np.zeros(len(FEATURES)), np.ones(len(FEATURES)), weights)

    def _standardize(self, features: np.ndarray) -> np.ndarray:
        features = np.nan_to_num(
            np.asarray(features, dtype=np.float64), nan=0.0, posinf=_CLIP, neginf=-_CLIP
        )
        return np.clip((features - self.mean) / self.scale, -_CLIP, _CLIP)

    def scores(self, features: np.ndarray) -> np.ndarray:
        """(C,) a score a candidate; higher is better."""
        if features.shape[1] != len(self.feature_names):
            raise ConfigError(
                f"the ranker reads {len(self.feature_names)} features, got {features.shape[1]}"
            )
        standardized = self._standardize(features)
        scores = standardized @ self.weights
        if self.residual is not None:
            scores += self.residual.scores(standardized)
        return scores

    def residual_scores(self, standardized: np.ndarray) -> np.ndarray | float:
        """What the fixed residual adds to each candidate's linear score (0 without one)."""
        return 0.0 if self.residual is None else self.residual.scores(standardized)

    def probabilities(self, scores: np.ndarray, similarity: float) -> np.ndarray | None:
        """(C,) each candidate's chance to be the right group (``similarity``: the best any
        candidate has); None before calibration."""
        if not self.calibrated:
            return None
        similarity = float(np.clip(np.nan_to_num(similarity), -1.0, 1.0))
        miss = self.miss_logit + self.miss_slope * similarity
        temperature = self.temperature * math.exp(self.temperature_slope * similarity)
        # Fitted on finitely many verdicts, it never says certain.
        return np.minimum(_softmax_with_miss(scores / temperature, miss)[:-1], MOST_LIKELY)

    def probabilities_of_texts(
        self, scores: np.ndarray, starts: np.ndarray, similarity: np.ndarray
    ) -> np.ndarray | None:
        """``probabilities`` of a batch of texts at once: text ``i``'s candidates' scores are
        ``scores[starts[i]:starts[i + 1]]`` and ``similarity[i]`` the best any of them has."""
        if not self.calibrated:
            return None
        sizes = starts[1:] - starts[:-1]
        text = np.arange(len(sizes)).repeat(sizes)
        # As ``probabilities`` reads it: NaN as 0, then within [-1, 1] (the cheap way for one
        # text, whose request pays each numpy call's fixed cost).
        similarity = np.asarray(similarity, np.float64)
        similarity = np.minimum(np.maximum(np.where(np.isnan(similarity), 0.0, similarity), -1), 1)
        miss = self.miss_logit + self.miss_slope * similarity
        temperature = self.temperature * np.exp(self.temperature_slope * similarity)
        logits = scores / temperature[text]
        # Each text's softmax over its logits and its miss logit, shifted by their maximum.
        filled = sizes > 0
        firsts = starts[:-1][filled]
        top = miss.copy()
        top[filled] = np.maximum(np.maximum.reduceat(logits, firsts), miss[filled])
        exp = np.exp(logits - top[text])
        totals = np.exp(miss - top)
        totals[filled] += np.add.reduceat(exp, firsts)
        return np.minimum(exp / totals[text], MOST_LIKELY)

    def calibration_parameters(self) -> tuple[float, float, float, float]:
        """(log temperature, its slope, miss logit, its slope): what ``_fit_calibration``
        fits."""
        if not self.calibrated:
            raise ConfigError("an uncalibrated ranker has no calibration to start from")
        return (
            math.log(self.temperature),
            self.temperature_slope,
            self.miss_logit,
            self.miss_slope,
        )

    def as_dict(self) -> dict:
        return {
            "kind": "linear",
            "feature_set": FEATURE_SET,
            "features": list(self.feature_names),
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "weights": self.weights.tolist(),
            "temperature": self.temperature,
            "miss_logit": self.miss_logit,
            "miss_slope": self.miss_slope,
            "temperature_slope": self.temperature_slope,
            "fitted_on": self.fitted_on,
            "metrics": self.metrics,
        } | ({} if self.residual is None else {"residual": self.residual.as_dict()})

    @classmethod
    def from_dict(cls, raw: object) -> LinearRanker:
        try:
            if not isinstance(raw, dict) or raw.get("kind") != "linear":
                raise ValueError("not a linear ranker")
            names = tuple(raw["features"])
            # A file without a feature set was written before sets were named: its names decide.
            if names != FEATURES or raw.get("feature_set", FEATURE_SET) != FEATURE_SET:
                raise ValueError(
                    f"its features (set {raw.get('feature_set', 'unnamed')}) are not the ones "
                    f"this version computes (set {FEATURE_SET})"
                )
            arrays = [
                np.asarray(raw[key], dtype=np.float64) for key in ("mean", "scale", "weights")
            ]
            if any(a.shape != (len(names),) or not np.isfinite(a).all() for a in arrays):
                raise ValueError("mean, scale and weights must be finite, one per feature")
            if (arrays[1] <= 0).any():
                raise ValueError("scales must be positive")
            temperature, miss = raw.get("temperature"), raw.get("miss_logit")
            if (temperature is None) != (miss is None):
                raise ValueError("temperature and miss_logit come together")
            slope = float(raw.get("miss_slope", 0.0))
            temperature_slope = float(raw.get("temperature_slope", 0.0))
            if temperature is not None and not (
                math.isfinite(temperature)
                and temperature > 0
                and math.isfinite(miss)
                and math.isfinite(slope)
                and math.isfinite(temperature_slope)
            ):
                raise ValueError("the calibration must be finite with a positive temperature")
            residual = raw.get("residual")
            if residual is not None:
                residual = ResidualNet.from_dict(residual, len(names))
            return cls(
                names, *arrays,
                temperature=None if temperature is None else float(temperature),
                miss_logit=None if miss is None else float(miss),
                miss_slope=slope,
                temperature_slope=temperature_slope,
                fitted_on=int(raw.get("fitted_on", 0)),
                metrics=dict(raw.get("metrics") or {}),
                residual=residual,
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactError(f"a stored ranker is unusable: {exc}") from None


def _softmax_with_miss(logits: np.ndarray, miss: float) -> np.ndarray:
    values = np.append(np.asarray(logits, dtype=np.float64), miss)
    values -= values.max()
    exp = np.exp(values)
    return exp / exp.sum()


MOST_LIKELY = 0.999
MIN_EXAMPLES = 20  # verdicts with a group, to fit weights on


@dataclass(frozen=True)
class FitConfig:
    # The pull toward the prior's weights (standardized space), in examples: a fit on this many
    # verdicts moves halfway from the prior, and a handful of verdicts cannot overturn it.
    prior_strength: float = 20.0
    folds: int = 5
    iterations: int = 200
    seed: int = 0


def fit_ranker(
    examples: Sequence[RankingExample], *, prior: LinearRanker, config: FitConfig = FitConfig()
) -> LinearRanker:
    """Weights fitted on the examples, pulled toward ``prior``'s; the probability calibrated on
    out-of-fold scores. Raises ``ConfigError`` when too few examples have a group (the prior
    then stands).

    A calibrated ``prior`` (the starter ranker, fitted on real labelled titles) is a starting
    point the verdicts move away from as they add up: its standardisation is kept, the weights
    are pulled toward its weights and the calibration toward its calibration, each with the
    strength of ``config.prior_strength`` verdicts, so 20 verdicts weigh as much as it does and
    2,000 outweigh it a hundred to one."""
    # Every verdict with a group counts towards the fit, wherever the group was found; the
    # weights learn from those whose group is among the candidates (a verdict for a group no
    # matcher proposed teaches through the history and the curators' members instead: as an
    # example with its features missing it cost 2 to 5 points of acc@1 on real titles,
    # bench/ranker_added_groups.py).
    counted = sum(1 for e in examples if len(e.candidates) and e.group_id is not None)
    if counted < MIN_EXAMPLES:
        raise ConfigError(
            f"a ranker needs at least {MIN_EXAMPLES} verdicts with a group, got {counted}"
        )
    usable = [e for e in examples if len(e.candidates) and e.target >= 0]
    # A calibrated prior (the starter) lends its standardisation and its residual network,
    # which stays fixed: verdicts move the linear weights and the calibration only.
    residual = prior.residual if prior.calibrated else None
    if prior.calibrated:
        mean, scale, anchor = prior.mean.copy(), prior.scale.copy(), prior.weights.copy()
        calibration_anchor = prior.calibration_parameters()
    else:
        basis = usable or [e for e in examples if len(e.candidates)]
        stacked = np.concatenate([e.candidates.features for e in basis]).astype(np.float64)
        stacked = np.nan_to_num(stacked, nan=0.0, posinf=0.0, neginf=0.0)
        mean = stacked.mean(axis=0)
        scale = stacked.std(axis=0)
        scale[scale < 1e-6] = 1.0
        # The prior's raw-space weights, in this standardized space.
        anchor = prior.weights / prior.scale * scale
        calibration_anchor = None
    base = LinearRanker(FEATURES, mean, scale, anchor.copy(), residual=residual)

    def fit(subset: Sequence[RankingExample]) -> np.ndarray:
        standardized = [base._standardize(e.candidates.features) for e in subset]
        offsets = [base.residual_scores(x) for x in standardized]
        return _fit_weights(standardized, [e.target for e in subset], anchor, config, offsets)

    rng = np.random.default_rng(config.seed)
    fold_of = rng.permutation(len(examples)) % max(config.folds, 2)
    out_of_fold: list[tuple[np.ndarray, int, float]] = []
    for fold in range(max(config.folds, 2)):
        train = [e for e, f in zip(examples, fold_of, strict=True) if f != fold]
        train = [e for e in train if len(e.candidates) and e.target >= 0]
        held = [e for e, f in zip(examples, fold_of, strict=True) if f == fold]
        if not train or not held:
            continue
        weights = fit(train)
        for example in held:
            served, target = example.candidates, example.target
            if example.added:  # as served: without the group the fit added, so a miss
                served, target = served.without_last(), -1
            if len(served):
                standardized = base._standardize(served.features)
                scores = standardized @ weights + base.residual_scores(standardized)
                out_of_fold.append((scores, target, float(served.similarity.max())))
    weights = fit(usable) if usable else anchor.copy()
    temperature, temperature_slope, miss, slope = _fit_calibration(
        out_of_fold,
        anchor=calibration_anchor,
        strength=config.prior_strength if calibration_anchor is not None else 0.0,
    )
    ranker = LinearRanker(
        FEATURES, mean, scale, weights, temperature=temperature, miss_logit=miss,
        miss_slope=slope, temperature_slope=temperature_slope,
        fitted_on=len(examples), residual=residual,
    )  # fmt: skip
    ranker.metrics = {"evidence": top_answer_evidence(ranker, out_of_fold)}
    return ranker


def top_answer_evidence(
    ranker: LinearRanker, scored: Sequence[tuple[np.ndarray, int, float]]
) -> dict[str, list]:
    """Each text's top answer as evidence of what the probability is worth: its probability
    and whether it was right, from (scores, the right row or -1, best similarity). A fit's
    evidence is scored by its folds' weights, which never saw the text; its calibration (four
    numbers) was fitted on these same scores, which flatters the evidence a little."""
    probabilities, right = [], []
    for scores, target, similarity in scored:
        top = int(np.argmax(scores))
        probabilities.append(round(float(ranker.probabilities(scores, similarity)[top]), 4))
        right.append(top == target)
    return {"probabilities": probabilities, "right": right}


def recalibrated(ranker: LinearRanker, examples: Sequence[RankingExample]) -> LinearRanker:
    """``ranker`` with its weights kept and its probability calibrated afresh on ``examples``.

    For evidence whose labels are trusted more than those the weights learnt from: a ranking
    learns from noisy labels almost as well as from clean ones, but a probability fitted on
    labels that disagree with themselves learns to doubt right answers."""
    if not ranker.calibrated:
        raise ConfigError("only a calibrated ranker is calibrated again")
    scored = [
        (ranker.scores(e.candidates.features), e.target, float(e.candidates.similarity.max()))
        for e in examples
        if len(e.candidates)
    ]
    if len(scored) < MIN_EXAMPLES:
        raise ConfigError(
            f"a calibration needs at least {MIN_EXAMPLES} examples with candidates, "
            f"got {len(scored)}"
        )
    temperature, temperature_slope, miss, slope = _fit_calibration(scored)
    return LinearRanker(
        ranker.feature_names, ranker.mean, ranker.scale, ranker.weights,
        temperature=temperature, miss_logit=miss, miss_slope=slope,
        temperature_slope=temperature_slope, fitted_on=ranker.fitted_on,
        metrics=dict(ranker.metrics), residual=ranker.residual,
    )  # fmt: skip


def with_residual(
    ranker: LinearRanker,
    examples: Sequence[RankingExample],
    config: ResidualConfig | None = None,
) -> LinearRanker:
    """``ranker`` with a residual network fitted on ``examples`` over its fixed linear scores.
    Its calibration was fitted on the linear scores alone: calibrate it again (``recalibrated``)
    on examples the residual did not learn from."""
    usable = [e for e in examples if len(e.candidates) and e.target >= 0]
    standardized = [ranker._standardize(e.candidates.features) for e in usable]
    linear = [x @ ranker.weights for x in standardized]
    targets = [e.target for e in usable]
    residual = fit_residual(standardized, linear, targets, config or ResidualConfig())
    return dataclasses.replace(ranker, residual=residual)


def _fit_weights(features, targets, anchor, config: FitConfig, offsets) -> np.ndarray:
    """Listwise softmax cross-entropy with an L2 pull toward ``anchor``, by L-BFGS; each
    candidate's ``offsets`` (the fixed residual's score, or 0) is added to its linear score."""
    import torch

    torch.manual_seed(config.seed)
    padded, added, mask = padded_lists(features, offsets, len(anchor), np.float64)
    x, offset = torch.tensor(padded), torch.tensor(added)
    valid = torch.tensor(mask)
    y = torch.tensor(targets)
    center = torch.tensor(anchor)
    w = center.clone().requires_grad_(True)
    optimiser = torch.optim.LBFGS(
        [w], lr=1, max_iter=config.iterations, line_search_fn="strong_wolfe"
    )

    def closure():
        optimiser.zero_grad()
        logits = (x @ w + offset).masked_fill(~valid, -1e9)  # (N, C)
        loss = torch.nn.functional.cross_entropy(logits, y)
        loss = loss + config.prior_strength / len(features) * ((w - center) ** 2).sum()
        loss.backward()
        return loss

    optimiser.step(closure)
    found = w.detach().numpy()
    return found if np.isfinite(found).all() else anchor.copy()


def _fit_calibration(
    out_of_fold: list[tuple[np.ndarray, int, float]],
    *,
    anchor: tuple[float, float, float, float] | None = None,
    strength: float = 0.0,
) -> tuple[float, float, float, float]:
    """The temperature and "none of these" logit (each an intercept and a slope on the best
    similarity) that make the out-of-fold probabilities likeliest; the miss takes the mass
    where the right group was not a candidate. Maximum likelihood by L-BFGS over four numbers,
    pulled toward ``anchor`` (log T, its slope, miss, its slope) with the weight of
    ``strength`` examples."""
    import torch

    if not out_of_fold:
        if anchor is not None:
            return math.exp(anchor[0]), anchor[1], anchor[2], anchor[3]
        return 1.0, 0.0, -50.0, 0.0
    widest = max(len(scores) for scores, _, _ in out_of_fold)
    scores = np.full((len(out_of_fold), widest), -1e9)
    for i, (row, _, _) in enumerate(out_of_fold):
        scores[i, : len(row)] = row
    targets = np.array([target for _, target, _ in out_of_fold])
    x = torch.tensor(scores)
    similarity = torch.tensor([s for _, _, s in out_of_fold], dtype=torch.float64)
    # The miss is the last column of the softmax: its index for the texts it takes.
    y = torch.tensor(np.where(targets >= 0, targets, widest))
    center = torch.tensor(anchor if anchor is not None else (0.0, 0.0, 0.0, 0.0))
    pull = max(strength / len(out_of_fold), 1e-4)
    # log T, its slope, miss, its slope
    params = center.clone().requires_grad_(True)
    optimiser = torch.optim.LBFGS([params], lr=1, max_iter=200, line_search_fn="strong_wolfe")

    def closure():
        optimiser.zero_grad()
        miss = (params[2] + params[3] * similarity)[:, None]
        temperature = torch.exp(params[0] + params[1] * similarity)[:, None]
        logits = torch.cat([x / temperature, miss], dim=1)
        loss = torch.nn.functional.cross_entropy(logits, y) + pull * ((params - center) ** 2).sum()
        loss.backward()
        return loss

    optimiser.step(closure)
    log_t, t_slope, miss, slope = params.detach().numpy().tolist()
    if not all(math.isfinite(v) for v in (log_t, t_slope, miss, slope)):
        return 1.0, 0.0, 0.0, 0.0
    clip = min(max(log_t, -5.0), 5.0)
    return math.exp(clip), min(max(t_slope, -5.0), 5.0), float(miss), float(slope)


# The prior's weight of a group's description beside its best member: it breaks the ties of
# titles listed under several groups and moves real titles toward the occupation they describe,
# with the pretrained tower and with the shipped n-gram model alike (docs/decisions/ranker.md).
PRIOR_DESCRIPTION_WEIGHT = 0.3


def hand_prior() -> LinearRanker:
    """The ranking written by hand, for every encoder: what a starter ranker is fitted from, and
    what ranks (with no probability) where the shipped starter cannot be read."""
    return LinearRanker.prior(description_weight=PRIOR_DESCRIPTION_WEIGHT)
