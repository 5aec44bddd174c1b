"""The live engine of each taxonomy, loaded once per process and reloaded when the pointer moves.

Every web and worker process reads the ``Deployment`` row on use (one indexed query) and loads
the model and index it names when they differ from what the process holds, so a promotion or
reindex reaches every process without a restart. The big arrays of both (the encoder's weights,
the index's vectors, the search's exact-cosine and trigram tables) are memory-mapped files, so
every process on a host shares one copy of each, whenever it loaded it. A build that cannot be
loaded (a file missing or truncated) leaves a process serving the engine it has, and is tried
again at most once every ``_LOAD_RETRY`` seconds.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
from celery import current_app
from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from annotations.models import Member, Taxonomy, TaxonomyRevision
from models_app.models import Deployment, TrainingRun
from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.encoders import Encoder, compiled_rebuild_wanted, load_encoder
from models_app.siamese.index import MemberIndex
from models_app.siamese.ranker.lexical import LexicalCache
from models_app.siamese.search import MemberSearch, SearchConfig
from models_app.siamese.specs import parse_search_config
from siamweb.task_names import COMPILE_MODEL_VERSION

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_engines: dict[int, LiveEngine] = {}
_loading: dict[int, threading.Lock] = {}  # per taxonomy: held by the thread loading its engine
_encoders: dict[int, Encoder] = {}
_pinned: dict[int, LiveEngine] = {}  # by index build: one not live that a caller asked for
_MAX_CACHED_ENCODERS = 4
# Per taxonomy: the index build that last failed to load, when, and why.
_failed: dict[int, tuple[int, float, str]] = {}
_LOAD_RETRY = 60.0  # seconds
_LIVE_POINTER_SQL = (
    f"SELECT index_build_id, ranker_id FROM {Deployment._meta.db_table} WHERE taxonomy_id = %s"
)
# The pointer and the taxonomy's revision (``reads.taxonomy_revision``) in one round trip.
_LIVE_POINTER_AND_REVISION_SQL = (
    f"SELECT d.index_build_id, d.ranker_id, r.revision FROM {Deployment._meta.db_table} d "
    f"LEFT JOIN {TaxonomyRevision._meta.db_table} r ON r.taxonomy_id = d.taxonomy_id "
    "WHERE d.taxonomy_id = %s"
)
_NEWER_MEMBERS_SQL = (
    f"SELECT id, text FROM {Member._meta.db_table} WHERE taxonomy_id = %s AND id > %s ORDER BY id"
)


# Members are looked for beyond the build's highest id as far back as this before the build: a
# member inserted by a transaction still open while the build read the members has a smaller id
# but was not seen by it.
_STRAGGLER_WINDOW = timedelta(minutes=10)
_STRAGGLER_RECHECK = 60.0  # seconds


@dataclass
class LiveEngine:
    taxonomy_id: int
    # Both None for an engine of a model that is not stored (``engine_unstored``).
    model_version_id: int | None
    model_label: str
    index_build_id: int | None
    max_member_id: int
    built_at: datetime
    encoder: Encoder
    index: MemberIndex
    search: MemberSearch
    indexed_ids: np.ndarray  # sorted member ids the index holds
    # Member texts' words and trigrams for the ranker, worked out once per process.
    lexical: LexicalCache = field(default_factory=LexicalCache)
    # Vectors of members the index does not hold, by (member id, text): an edited text is new.
    _delta: dict[tuple[int, str], np.ndarray] = field(default_factory=dict)
    _straggler_rows: list[tuple[int, str]] = field(default_factory=list)
    _stragglers_at: float | None = None
    _newer_at: tuple[int, list[tuple[int, str]]] | None = None  # (revision, rows) last read
    # An unstored engine's group facts with the rows they were built from (``serving.groups``).
    own_group_facts: tuple | None = None

    def nearest_members(
        self, texts: list[str], depth: int, *, cache: HitsCache | None = None
    ) -> list[list[tuple[int, float]]]:
        """The ``depth`` best (member id, score) of each text, members added since the build
        included; members deleted since may appear and are for the caller to drop. With a
        ``cache``, texts it holds are not encoded or searched again."""
        return self.search_texts(texts, depth, cache=cache)[0]

    def search_texts(
        self,
        texts: list[str],
        depth: int,
        *,
        cache: HitsCache | None = None,
        revision: int | None = None,
    ) -> tuple[list[list[tuple[int, float]]], np.ndarray]:
        """``nearest_members`` and the texts' vectors (Q, D), which the ranker reads too.
        ``revision``: the taxonomy's, read before (``reads.taxonomy_revision``); while it stays,
        the members added since the build are not read again."""
        delta_ids, delta_texts, delta_vectors = self.delta_vectors(revision)
        if cache is not None:
            cache.valid_for((self.index_build_id, depth, delta_ids.tobytes()))
        missing = [text for text in texts if cache is None or text not in cache]
        found, vectors = [], np.zeros((0, self.encoder.dim), np.float32)
        if missing:
            vectors = np.asarray(self.encoder.encode(missing), dtype=np.float32)  # (Q, D)
            found = self.search.search(
                missing,
                vectors,
                depth,
                extra_ids=delta_ids,
                extra_texts=delta_texts,
                extra_vectors=delta_vectors,
            )
        if cache is None:
            return found, vectors
        # What the cache holds of these texts is read before the new ones go in: putting them
        # may drop the least recently used, which can be one of these very texts.
        fresh = {text: (hits, vector) for text, hits, vector in zip(missing, found, vectors,
                                                                     strict=True)}  # fmt: skip
        held = {text: cache.get(text) for text in dict.fromkeys(texts) if text not in fresh}
        for text, (hits, vector) in fresh.items():
            cache.put(text, hits, vector)
        rows = [fresh[text] if text in fresh else held[text] for text in texts]
        stacked = (
            np.stack([vector for _, vector in rows])
            if rows
            else np.zeros((0, self.encoder.dim), np.float32)
        )
        return [hits for hits, _ in rows], stacked

    def _stragglers(self) -> list[tuple[int, str]]:
        """Members below the build's highest id that the build did not see (rare: inserted by a
        transaction still open while it read). Looked for at most once a minute: after an import
        every member falls in the window, and scanning them on each request would cost more than
        the search."""
        now = time.monotonic()
        if self._stragglers_at is not None and now - self._stragglers_at < _STRAGGLER_RECHECK:
            return self._straggler_rows
        rows = list(
            Member.objects.filter(
                taxonomy_id=self.taxonomy_id,
                id__lte=self.max_member_id,
                created_at__gte=self.built_at - _STRAGGLER_WINDOW,
            ).values_list("id", "text")
        )
        ids = np.array([member_id for member_id, _ in rows], dtype=np.int64)
        unseen = ~np.isin(ids, self.indexed_ids) if len(ids) else np.zeros(0, bool)
        self._straggler_rows = [row for row, missing in zip(rows, unseen, strict=True) if missing]
        self._stragglers_at = now
        return self._straggler_rows

    def delta_vectors(
        self, revision: int | None = None
    ) -> tuple[np.ndarray, list[str], np.ndarray]:
        """Ids, texts and vectors of members the index does not hold yet; each encoded once.
        Read at every call but one at the ``revision`` the last read was (plain SQL, as for
        the live build): a member added or edited moves the revision."""
        newer_at = self._newer_at
        if revision is not None and newer_at is not None and newer_at[0] == revision:
            newer = newer_at[1]
        else:
            with connection.cursor() as cursor:
                cursor.execute(_NEWER_MEMBERS_SQL, [self.taxonomy_id, self.max_member_id])
                newer = [tuple(row) for row in cursor.fetchall()]
            if revision is not None:
                self._newer_at = (revision, newer)
        rows = sorted(self._stragglers() + newer)
        missing = [row for row in rows if row not in self._delta]
        if missing:
            vectors = self.encoder.encode([text for _, text in missing])
            with _lock:
                for row, vector in zip(missing, vectors, strict=True):
                    self._delta[row] = vector
        if not rows:
            return np.zeros(0, np.int64), [], np.zeros((0, self.encoder.dim), np.float32)
        ids = np.array([member_id for member_id, _ in rows], dtype=np.int64)
        return ids, [text for _, text in rows], np.stack([self._delta[row] for row in rows])


class NoLiveModel(Exception):
    def __init__(self, taxonomy: Taxonomy) -> None:
        # The run making its first model (an import queues one) is what a curator can wait for;
        # with none, the command an admin runs.
        making = (
            TrainingRun.objects.filter(
                taxonomy=taxonomy,
                kind=TrainingRun.Kind.BUILD,
                status__in=TrainingRun.ACTIVE_STATUSES,
            )
            .order_by("-id")
            .first()
        )
        if making is not None:
            then = (
                f"run #{making.id} ({making.kind}, {making.status}) is making one; try again "
                "when it ends"
            )
        else:
            then = f"run `python manage.py train {taxonomy.slug} --activate`"
        super().__init__(f"taxonomy {taxonomy.slug!r} has no live model yet; {then}")


# What a call into serving raises when it cannot answer at all: the taxonomy has no live model
# yet (the API's 409), or the live model's files cannot be loaded (an ``ArtifactError``, a 503).
# Callers outside the model side catch this, not the engine's file errors by name.
SERVING_UNAVAILABLE = (NoLiveModel, ArtifactError)


class HitsCache:
    """The nearest members of texts seen before, for one caller that sees many texts again (a
    bulk job: a file of job ads repeats its titles). Held only while the engine, the depth and
    the members added since the build stay as they were, so a hit from the cache is the hit a
    search would give; at most ``size`` texts, least recently used dropped first, each as two
    small arrays (some 700 bytes at a depth of 40)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._hits: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._key: tuple | None = None

    def valid_for(self, key: tuple) -> None:
        if key != self._key:
            self._hits.clear()
            self._key = key

    def __contains__(self, text: str) -> bool:
        return text in self._hits

    def put(self, text: str, hits: list[tuple[int, float]], vector: np.ndarray) -> None:
        # Scores are float32 values (the search's): stored as float32, read back unchanged.
        ids = np.array([member_id for member_id, _ in hits], dtype=np.int64)
        scores = np.array([score for _, score in hits], dtype=np.float32)
        self._hits[text] = (ids, scores, np.asarray(vector, dtype=np.float32))
        if len(self._hits) > self.size:
            self._hits.popitem(last=False)

    def get(self, text: str) -> tuple[list[tuple[int, float]], np.ndarray]:
        self._hits.move_to_end(text)
        ids, scores, vector = self._hits[text]
        return list(zip(ids.tolist(), scores.tolist(), strict=True)), vector


def artifact_path(relative: str) -> Path:
    return Path(settings.SIAMWEB_ARTIFACTS_DIR) / relative


def encoder_for(model_version) -> Encoder:
    with _lock:
        encoder = _encoders.get(model_version.id)
    if encoder is None:
        encoder = load_encoder(artifact_path(model_version.artifact_path), mapped=True)
        _compile_again_if_wanted(model_version.id, encoder)
        with _lock:
            if len(_encoders) >= _MAX_CACHED_ENCODERS:
                _encoders.pop(next(iter(_encoders)))
            _encoders[model_version.id] = encoder
    return encoder


def _compile_again_if_wanted(model_version_id: int, encoder: Encoder) -> None:
    """A tower whose compiled copy is missing, stale or damaged encodes with PyTorch (its load
    said why, once) while the worker compiles it again; the tower takes the new copy up by
    itself (``compiled.CompiledServing``)."""
    if compiled_rebuild_wanted(encoder) is None:
        return
    try:
        current_app.send_task(COMPILE_MODEL_VERSION, args=[model_version_id], retry=False)
    except Exception as exc:  # a broker away must not fail the request this load serves
        logger.warning(
            "model version %s: the worker was not asked to compile it: %s", model_version_id, exc
        )


def live_engine(taxonomy: Taxonomy) -> LiveEngine | None:
    """The taxonomy's live model and index, or None when it has never been built."""
    return live_engine_and_ranker(taxonomy)[0]


def live_engine_and_ranker(taxonomy: Taxonomy) -> tuple[LiveEngine | None, int | None]:
    """The live engine (as ``live_engine``) and the id of the live ranker, from one read."""
    engine, ranker_id, _ = live_engine_ranker_and_revision(taxonomy)
    return engine, ranker_id


def live_engine_ranker_and_revision(
    taxonomy: Taxonomy,
) -> tuple[LiveEngine | None, int | None, int | None]:
    """``live_engine_and_ranker`` and the taxonomy's revision (as ``reads.taxonomy_revision``
    reads it: None inside a transaction), from one read."""
    with _lock:
        cached = _engines.get(taxonomy.id)
        loading = _loading.setdefault(taxonomy.id, threading.Lock())
    # Every request asks; the answer is three indexed integers. Read by plain SQL: building the
    # ORM query cost more than the database.
    with connection.cursor() as cursor:
        cursor.execute(_LIVE_POINTER_AND_REVISION_SQL, [taxonomy.id])
        row = cursor.fetchone()
    if row is None:
        return None, None, None
    ranker_id = row[1]
    revision = None if connection.in_atomic_block else (row[2] or 0)
    if cached is not None and cached.index_build_id == row[0]:
        return cached, ranker_id, revision
    return _live_engine_load(taxonomy, cached, loading), ranker_id, revision


def live_ranker_id(taxonomy: Taxonomy) -> int | None:
    """The live ranker's id alone: for a caller that pinned its engine (a bulk job)."""
    with connection.cursor() as cursor:
        cursor.execute(_LIVE_POINTER_SQL, [taxonomy.id])
        row = cursor.fetchone()
    return row[1] if row is not None else None


def _live_engine_load(taxonomy: Taxonomy, cached, loading) -> LiveEngine | None:
    deployment = (
        Deployment.objects.filter(taxonomy=taxonomy)
        .select_related("index_build__model_version__taxonomy")
        .first()
    )
    if deployment is None:
        return None
    build = deployment.index_build
    with _lock:
        failed = _failed.get(taxonomy.id)
    if failed and failed[0] == build.id and time.monotonic() - failed[1] < _LOAD_RETRY:
        return _serving_despite(cached, failed[2])
    # One load a swap per process: the thread that takes the lock loads the new engine; others
    # keep answering with the engine they have (or, with none yet, wait for the first).
    if not loading.acquire(blocking=cached is None):
        return cached
    try:
        with _lock:
            current = _engines.get(taxonomy.id)
        if current is not None and current.index_build_id == build.id:
            return current  # loaded by the thread that held the lock before this one
        try:
            engine = _load_engine(taxonomy, build)
        except ArtifactError as exc:
            reason = f"index build {build.id} of {build.model_version.label}: {exc}"
            with _lock:
                _failed[taxonomy.id] = (build.id, time.monotonic(), reason)
            if cached is not None:
                logger.error("%s: %s; %s keeps serving", taxonomy.slug, reason, cached.model_label)
            return _serving_despite(current or cached, reason)
        with _lock:
            _failed.pop(taxonomy.id, None)
        return engine
    finally:
        loading.release()


def _serving_despite(engine: LiveEngine | None, reason: str) -> LiveEngine:
    """The engine this process holds while the live build cannot be loaded; with none, the
    reason, as an ``ArtifactError`` (a 503 naming it)."""
    if engine is None:
        raise ArtifactError(reason)
    return engine


def preload_live_engines() -> dict[str, str]:
    """Load the live engine of every taxonomy now, before a web server forks its workers
    (``deploy/gunicorn.conf.py``): the workers then share the model's and index's pages
    instead of each loading a copy. Per taxonomy slug, the loaded model's label or why it could
    not load; a broken artifact is reported, not raised, and its requests answer 503 as usual.
    """
    loaded = {}
    for taxonomy in Taxonomy.objects.filter(deployment__isnull=False).order_by("id"):
        try:
            engine = live_engine(taxonomy)
        except DatabaseError:
            raise
        except Exception as exc:
            # Run before gunicorn forks: whatever one taxonomy's files raise, the server starts,
            # and that taxonomy's requests say why in their own answers.
            logger.exception("%s: live engine not preloaded", taxonomy.slug)
            loaded[taxonomy.slug] = f"not loaded: {type(exc).__name__}: {exc}"
            continue
        loaded[taxonomy.slug] = engine.model_label if engine is not None else "no live model"
    return loaded


def engine_for_build(taxonomy: Taxonomy, build) -> LiveEngine:
    """The engine of this index build: the live one while the build is live, else one loaded
    for its callers alone (a bulk job answers every row with the build it started with, even
    after a promotion). The last such build is kept; the live engines are left as they are."""
    with _lock:
        live = _engines.get(taxonomy.id)
        pinned = _pinned.get(build.id)
    if live is not None and live.index_build_id == build.id:
        return live
    if pinned is None:
        pinned = _engine_of(taxonomy, build)
        with _lock:
            _pinned.clear()
            _pinned[build.id] = pinned
    return pinned


def _load_engine(taxonomy: Taxonomy, build) -> LiveEngine:
    engine = _engine_of(taxonomy, build)
    with _lock:
        replaced = _engines.get(taxonomy.id)
        _engines[taxonomy.id] = engine
        if replaced is not None and replaced.model_version_id != engine.model_version_id:
            # The model it replaced is not kept loaded for later either: its mapped weights
            # would stay in this process's page tables, and count in its memory, for nothing.
            _encoders.pop(replaced.model_version_id, None)
    del replaced
    _return_freed_memory()  # a replaced engine's, and what loading this one left behind
    return engine


def _return_freed_memory() -> None:
    """Hand the heap a replaced engine held back to the system. glibc keeps freed memory for
    reuse, so without this each process stays as large as the old and new engine together after
    every swap, and a web server with many swaps a day only grows."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc: nothing to trim
        return
    libc.malloc_trim(0)


def _engine_of(taxonomy: Taxonomy, build) -> LiveEngine:
    folder = artifact_path(build.artifact_path)
    index = MemberIndex.load(folder, mapped=True)
    encoder = encoder_for(build.model_version)
    if index.dim != encoder.dim:
        raise ArtifactError(
            f"index build {build.id} holds {index.dim}-dimensional vectors but "
            f"{build.model_version.label} encodes {encoder.dim}: they cannot serve together"
        )
    search_config = parse_search_config(build.model_version.config)
    texts: list[str] = []
    if search_config.lexical_weight > 0:
        # Members deleted since the build keep a blank text: they are dropped from results.
        text_of = dict(Member.objects.filter(taxonomy=taxonomy).values_list("id", "text"))
        texts = [text_of.get(int(member_id), "") for member_id in index.member_ids()]
    engine = LiveEngine(
        taxonomy_id=taxonomy.id,
        model_version_id=build.model_version_id,
        model_label=build.model_version.label,
        index_build_id=build.id,
        max_member_id=build.max_member_id,
        built_at=build.created_at,
        encoder=encoder,
        index=index,
        search=MemberSearch(index, texts, search_config, tables=folder),
        indexed_ids=np.sort(index.member_ids()),
    )
    return engine


def member_rows(taxonomy: Taxonomy) -> list[tuple[int, str]]:
    """Every member of the taxonomy as (id, text), by id: what an index is built over."""
    return list(Member.objects.filter(taxonomy=taxonomy).order_by("id").values_list("id", "text"))


def engine_unstored(
    taxonomy: Taxonomy, *, encoder: Encoder, search_config: SearchConfig, label: str
) -> LiveEngine:
    """An engine of a model that was never stored (a fine-tune's first phase): every member of
    the taxonomy encoded by ``encoder`` and indexed, held in memory for its caller alone. The
    gate asks it what users would see, with a ranker fitted for it. Nothing it serves is cached
    under a version's id."""
    rows = member_rows(taxonomy)
    member_ids = [member_id for member_id, _ in rows]
    texts = [text for _, text in rows]
    index = MemberIndex.build(np.asarray(encoder.encode(texts), dtype=np.float32), member_ids)
    text_of = dict(rows)
    indexed = [text_of[int(member_id)] for member_id in index.member_ids()]
    return LiveEngine(
        taxonomy_id=taxonomy.id,
        model_version_id=None,
        model_label=label,
        index_build_id=None,
        max_member_id=max(member_ids),
        built_at=timezone.now(),
        encoder=encoder,
        index=index,
        search=MemberSearch(index, indexed if search_config.lexical_weight else [], search_config),
        indexed_ids=np.sort(index.member_ids()),
    )


def forget_loaded_engines() -> None:
    """Drop every loaded model and index (tests, and after artifacts are deleted)."""
    with _lock:
        _engines.clear()
        _encoders.clear()
        _pinned.clear()
        _failed.clear()
