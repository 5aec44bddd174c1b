"""Each live engine's view of its taxonomy's groups: names, and descriptions in the engine's own
embedding, for the ranker's description and name evidence.

A description is encoded once per model version: the vectors are kept on disk by the text's
hash (``descriptions/<model version>.npz`` beside the taxonomy's indexes), so every process and
every index build of that version reuse them, and an edited description is encoded again. The
rows are read again at most every ``_RECHECK`` seconds: a renamed group or edited description
counts within that, without a read per request.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import uuid
from pathlib import Path

import numpy as np

from annotations.models import Group
from models_app.serving.engines import LiveEngine, artifact_path
from models_app.siamese.artifacts import DAMAGED_FILE_ERRORS
from models_app.siamese.encoders import Encoder
from models_app.siamese.ranker.candidates import GroupFacts

_RECHECK = 60.0  # seconds
_lock = threading.Lock()
# Per engine (by index build): (monotonic time read, the rows it was built from, the facts).
_facts: dict[int, tuple[float, list[tuple[int, str, str]], GroupFacts]] = {}
_MAX_ENGINES = 8


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _cache_file(taxonomy_slug: str, model_version_id: int) -> Path:
    return artifact_path(f"{taxonomy_slug}/descriptions/{model_version_id}.npz")


def description_vectors_drop(*, taxonomy_slug: str, model_version_id: int) -> None:
    """Delete a model version's description vectors, when the version itself is deleted."""
    _cache_file(taxonomy_slug, model_version_id).unlink(missing_ok=True)


def description_vectors(
    *, taxonomy_slug: str, model_version_id: int, encoder: Encoder, descriptions: list[str]
) -> np.ndarray:
    """(G, D) the descriptions' vectors in ``encoder``'s embedding, zero rows for blank ones;
    read from the version's cache where it holds them, the rest encoded and added to it."""
    path = _cache_file(taxonomy_slug, model_version_id)
    known: dict[str, np.ndarray] = {}
    try:
        with np.load(path) as stored:
            known = dict(zip(stored["keys"].tolist(), stored["vectors"], strict=True))
    except DAMAGED_FILE_ERRORS:
        known = {}  # none yet, or unreadable: encoded again and written anew
    keys = [_digest(text) if text else "" for text in descriptions]
    missing = sorted({(key, text) for key, text in zip(keys, descriptions, strict=True)
                      if text and key not in known})  # fmt: skip
    if missing:
        vectors = np.asarray(encoder.encode([text for _, text in missing]), dtype=np.float32)
        known.update(zip([key for key, _ in missing], vectors, strict=True))
        _write(path, known)
    found = np.zeros((len(descriptions), encoder.dim), np.float32)
    for row, key in enumerate(keys):
        if key:
            found[row] = known[key]
    return found


def descriptions_to_encode(
    *, taxonomy_slug: str, model_version_id: int | None, descriptions: list[str]
) -> int:
    """How many distinct ``descriptions`` ``description_vectors`` would encode for the version
    (all of them for a version not stored yet, ``model_version_id`` None)."""
    known: set[str] = set()
    if model_version_id is not None:
        try:
            with np.load(_cache_file(taxonomy_slug, model_version_id)) as stored:
                known = set(stored["keys"].tolist())
        except DAMAGED_FILE_ERRORS:
            known = set()
    return len({_digest(text) for text in descriptions if text} - known)


def _write(path: Path, vectors: dict[str, np.ndarray]) -> None:
    """Write the cache under a temporary name and rename it into place: a reader sees the old
    file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".tmp-{uuid.uuid4().hex[:8]}-{path.name}")
    keys = list(vectors)
    with scratch.open("wb") as handle:
        np.savez(handle, keys=np.array(keys), vectors=np.stack([vectors[k] for k in keys]))
        handle.flush()
        os.fsync(handle.fileno())
    scratch.replace(path)


def group_rows(taxonomy_id: int) -> list[tuple[int, str, str]]:
    return list(
        Group.objects.filter(taxonomy_id=taxonomy_id)
        .order_by("id")
        .values_list("id", "name", "description")
    )


def engine_group_facts(engine: LiveEngine, taxonomy_slug: str) -> GroupFacts:
    """The groups as ``engine`` sees them, read again when older than ``_RECHECK``. An engine
    of a model not stored encodes its descriptions itself and keeps them on itself alone."""
    if engine.index_build_id is None:
        rows = group_rows(engine.taxonomy_id)
        if engine.own_group_facts is None or engine.own_group_facts[0] != rows:
            engine.own_group_facts = (rows, _group_facts(engine, taxonomy_slug, rows))
        return engine.own_group_facts[1]
    now = time.monotonic()
    with _lock:
        cached = _facts.get(engine.index_build_id)
    if cached is not None and now - cached[0] < _RECHECK:
        return cached[2]
    rows = group_rows(engine.taxonomy_id)
    facts = (
        cached[2]
        if cached is not None and cached[1] == rows
        else _group_facts(engine, taxonomy_slug, rows)
    )
    with _lock:
        if len(_facts) >= _MAX_ENGINES and engine.index_build_id not in _facts:
            _facts.pop(next(iter(_facts)))
        _facts[engine.index_build_id] = (now, rows, facts)
    return facts


def _group_facts(engine: LiveEngine, taxonomy_slug: str, rows) -> GroupFacts:
    if engine.model_version_id is None:
        descriptions = [description for _, _, description in rows if description]
        encoded = iter(np.asarray(engine.encoder.encode(descriptions), dtype=np.float32)
                       if descriptions else ())  # fmt: skip
        vectors = np.zeros((len(rows), engine.encoder.dim), np.float32)
        for row, (_, _, description) in enumerate(rows):
            if description:
                vectors[row] = next(encoded)
    else:
        vectors = description_vectors(
            taxonomy_slug=taxonomy_slug,
            model_version_id=engine.model_version_id,
            encoder=engine.encoder,
            descriptions=[description for _, _, description in rows],
        )
    return GroupFacts.build(
        [group_id for group_id, _, _ in rows],
        [name for _, name, _ in rows],
        vectors,
        [bool(description) for _, _, description in rows],
    )


def forget_group_facts() -> None:
    with _lock:
        _facts.clear()
