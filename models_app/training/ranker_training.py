"""The ranker learnt from verdicts: fitted on the taxonomy's verdicts for the live model, gated
on held-out verdicts against the ranker it would replace, made live when no worse.

Each judged text is a labelled ranking: its candidates as the live engine finds them now, and
the group a curator put it in (confirm, reassign) or none of them ("none of these"). A text is
measured without its own verdict: its curator member is left out of the hits and its verdict out
of the history (how often each group was chosen or rejected, and the texts it was wrong for).

The gate holds out the newest fifth of the verdicts new to the live ranker, fits a candidate on
the rest, and compares both on the held-out texts (their curator members left out for both):
McNemar's exact test at ``SIAMWEB_GATE_ALPHA``, as the model gate
(``models_app/training/gate.py``). When
the candidate is not significantly worse, the ranker fitted on every verdict goes live.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from annotations.models import Group, Judgement, Taxonomy
from models_app.models import BulkJob, Deployment, RankerVersion
from models_app.serving.candidate_inputs import candidate_inputs
from models_app.serving.engines import LiveEngine, artifact_path, live_engine_and_ranker
from models_app.serving.rankers import ServingRanker, engine_prior, serving_ranker
from models_app.serving.reads import normalization_rows
from models_app.siamese.artifacts import atomic_directory
from models_app.siamese.configs import ConfigError
from models_app.siamese.ranker.candidates import SearchedTexts, candidates_of_texts
from models_app.siamese.ranker.features import FEATURE_SET
from models_app.siamese.ranker.files import save_ranker
from models_app.siamese.ranker.model import MIN_EXAMPLES, RankingExample, fit_ranker
from models_app.siamese.ranker.verdict_history import OwnVerdict, VerdictHistory
from models_app.siamese.stats import paired_comparison

logger = logging.getLogger(__name__)

HELD_OUT_SHARE = 0.2
# Rankers kept a taxonomy, the live one among them: a fit comes every 20 verdicts and each file
# holds the whole verdict history, so unpruned they grow with the square of the verdicts.
KEEP_RANKERS = 3
# Hits asked beyond the ranker's depth: a text's own curator members are dropped from them.
_SLACK = 10


@dataclass(frozen=True)
class JudgedText:
    """A judged text and what its live verdicts say: where it belongs (None: none of the
    groups offered), the groups it was rejected for, and the newest verdict's id."""

    text: str
    key: str
    group_id: int | None
    rejected: tuple[int, ...]
    last_id: int


def judged_texts(taxonomy: Taxonomy) -> list[JudgedText]:
    """Every text with a live final verdict, oldest first; its latest final verdict decides
    where it belongs, and every rejection of it (false match, reassign) counts."""
    rows = (
        Judgement.objects.live()
        .filter(review_item__taxonomy=taxonomy)
        .exclude(verdict=Judgement.Verdict.SKIP)
        .order_by("id")
        .values_list(
            "id", "review_item__input__text", "review_item__input__normalized_text",
            "verdict", "group_id", "rejected_group_id",
        )
    )  # fmt: skip
    final: dict[str, tuple[str, int | None, int]] = {}
    rejected: dict[str, list[int]] = {}
    for judgement_id, text, key, verdict, group_id, rejected_group_id in rows:
        if rejected_group_id is not None:
            rejected.setdefault(key, []).append(rejected_group_id)
        if verdict in Judgement.FINAL_VERDICTS:
            final[key] = (text, group_id, judgement_id)
    found = [
        JudgedText(text, key, group_id, tuple(rejected.get(key, ())), last_id)
        for key, (text, group_id, last_id) in final.items()
    ]
    return sorted(found, key=lambda judged: judged.last_id)


@dataclass
class _Prepared:
    """The judged texts as the live engine searched them, once for the gate's fits and the
    final one: ``searched`` row for row with ``judged``, every curator member in the hits."""

    engine: LiveEngine
    taxonomy_slug: str
    judged: list[JudgedText]
    searched: SearchedTexts


def _prepare(engine: LiveEngine, taxonomy: Taxonomy, judged: list[JudgedText]) -> _Prepared:
    depth = settings.SIAMWEB_RANKER_DEPTH + _SLACK
    texts = [j.text for j in judged]
    hits, vectors = engine.search_texts(texts, depth)
    read = normalization_rows(taxonomy.id, {m for row in hits for m, _ in row}, set())
    return _Prepared(
        engine, taxonomy.slug, judged, SearchedTexts(texts, vectors, hits, read.members)
    )


def _history(prepared: _Prepared, rows: Collection[int], group_count: int) -> tuple:
    """The verdict history of the judged texts at ``rows``, and per row its rejected rows."""
    confirmed: dict[int, int] = {}
    rejected: dict[int, int] = {}
    groups, vectors, rows_of = [], [], {}
    for row in rows:
        judged = prepared.judged[row]
        if judged.group_id is not None:
            confirmed[judged.group_id] = confirmed.get(judged.group_id, 0) + 1
        rows_of[row] = []
        for group in judged.rejected:
            rejected[group] = rejected.get(group, 0) + 1
            rows_of[row].append(len(groups))
            groups.append(group)
            vectors.append(prepared.searched.vectors[row])
    dim = prepared.searched.vectors.shape[1]
    history = VerdictHistory(
        confirmed=confirmed,
        rejected=rejected,
        rejected_groups=np.array(groups, np.int64),
        rejected_vectors=np.array(vectors, np.float32).reshape(-1, dim),
        group_count=group_count,
    )
    return history, rows_of


def _examples(
    prepared: _Prepared, rows, *, history, rows_of, hidden: frozenset[str] = frozenset()
) -> list[RankingExample]:
    """The judged texts at ``rows`` as ranking examples, each without its own verdict, and
    without the curator members of the texts in ``hidden``."""
    rows = list(rows)
    judged = [prepared.judged[row] for row in rows]
    searched, evidence = candidate_inputs(
        prepared.engine, prepared.taxonomy_slug, prepared.searched.at(rows), history=history,
        left_out=[hidden | {j.key} for j in judged], depth=settings.SIAMWEB_RANKER_DEPTH,
    )  # fmt: skip
    owns = [
        OwnVerdict(j.group_id, tuple(rows_of.get(row, ()))) if row in rows_of else None
        for row, j in zip(rows, judged, strict=True)
    ]
    candidates = candidates_of_texts(searched, evidence, own=owns)
    return [
        RankingExample(found, prepared.judged[row].group_id)
        for row, found in zip(rows, candidates, strict=True)
    ]


def _top_hits(examples: list[RankingExample], ranker) -> list[bool]:
    hits = []
    for example in examples:
        candidates = example.candidates
        if not len(candidates):
            hits.append(False)
            continue
        top = int(np.argmax(ranker.scores(candidates.features)))
        hits.append(int(candidates.groups[top]) == example.group_id)
    return hits


def ranker_fit(*, taxonomy: Taxonomy) -> RankerVersion | None:
    """Fit a ranker on the taxonomy's verdicts for its live model, gate it against the live
    ranker (or the model's prior) and make it live when no worse. None when there is no live
    model or too few verdicts to fit on (the live ranker, or the prior, keeps serving)."""
    engine, ranker_id = live_engine_and_ranker(taxonomy)
    if engine is None:
        return None
    current = serving_ranker(engine, ranker_id)
    judged = judged_texts(taxonomy)
    with_group = sum(j.group_id is not None for j in judged)
    if with_group < MIN_EXAMPLES:
        # Verdicts enough, judged texts not (two curators' verdicts on a text are one example).
        if judged:
            reason = f"needs {MIN_EXAMPLES} judged texts with a group, got {with_group}"
            _refused(taxonomy, engine, judged, with_group, reason)
        return None
    group_count = Group.objects.filter(taxonomy=taxonomy).count()
    prepared = _prepare(engine, taxonomy, judged)
    prior = engine_prior(engine).ranker
    everyone = range(len(judged))

    gate = _gate(prepared, current, prior, group_count=group_count)
    history, rows_of = _history(prepared, everyone, group_count)
    examples = _examples(prepared, everyone, history=history, rows_of=rows_of)
    try:
        ranker = fit_ranker(examples, prior=prior)
    except ConfigError as exc:
        usable = sum(1 for e in examples if len(e.candidates) and e.group_id is not None)
        _refused(taxonomy, engine, judged, usable, str(exc))
        return None
    ranker.metrics = {**ranker.metrics, "examples": len(examples), "gate": gate.get("summary", "")}
    return _store(taxonomy, engine, ranker, history, judged, gate)


def _refused(taxonomy, engine, judged: list[JudgedText], usable: int, reason: str) -> None:
    """Logged once: beat tries again only when a newer verdict is stored."""
    Deployment.objects.filter(taxonomy=taxonomy).update(
        ranker_refused_until=max(j.last_id for j in judged),
        ranker_refused_usable=usable,
        ranker_refused_model_version_id=engine.model_version_id,
    )
    logger.info("no ranker for %s yet: %s", taxonomy.slug, reason)


def _gate(prepared: _Prepared, current: ServingRanker, prior, *, group_count) -> dict:
    """The candidate fitted without the newest fifth of the verdicts new to ``current``,
    against ``current`` on them."""
    after = 0
    if current.version_id is not None:
        after = (
            RankerVersion.objects.filter(id=current.version_id)
            .values_list("verdicts_until", flat=True)
            .first()
            or 0
        )
    new = [row for row, j in enumerate(prepared.judged) if j.last_id > after]
    held = new[len(new) - max(1, round(len(new) * HELD_OUT_SHARE)) :] if new else []
    held = [row for row in held if prepared.judged[row].group_id is not None]
    if not held:
        return {"decision": "promote", "held_out": 0,
                "summary": "no new verdicts to hold out: nothing to compare"}  # fmt: skip
    hidden = frozenset(prepared.judged[row].key for row in held)
    rest = [row for row in range(len(prepared.judged)) if row not in set(held)]
    before = _top_hits(
        _examples(prepared, held, history=current.history, rows_of={}, hidden=hidden),
        current.ranker,
    )
    after_hits = _held_out_hits(prepared, held, rest, hidden, prior, group_count=group_count)
    found = paired_comparison(before, after_hits, alpha=settings.SIAMWEB_GATE_ALPHA)
    n = found["n"]
    chance = found["p_worse"]
    verdict = "blocking" if found["significantly_worse"] else "not blocking"
    odds = f"1 time in {1 / chance:.0f}" if chance > 0 else "never"
    summary = (
        f"held-out verdicts: {sum(after_hits)} of {n} right against {sum(before)} of {n} "
        f"before; "
        + (
            f"a drop this size happens by chance {odds}: {verdict}"
            if found["lost"] > found["gained"]
            else f"no drop: {verdict}"
        )
    )
    return {
        "decision": "reject" if found["significantly_worse"] else "promote",
        "held_out": n,
        "against": "the live ranker" if current.version_id else "the model's prior",
        "summary": summary,
        **{key: found[key] for key in ("live", "candidate", "delta", "ci95", "lost", "gained",
                                       "p_worse", "alpha")},
    }  # fmt: skip


def _held_out_hits(
    prepared: _Prepared, held, rest, hidden: frozenset[str], prior, *, group_count: int
) -> list[bool]:
    """Per held-out row, whether a ranker fitted on the ``rest`` rows alone (the ``prior``
    where they are too few to fit) puts its text's group first; the texts in ``hidden`` are
    nobody's evidence."""
    history, rows_of = _history(prepared, rest, group_count)
    try:
        ranker = fit_ranker(
            _examples(prepared, rest, history=history, rows_of=rows_of, hidden=hidden),
            prior=prior,
        )
    except ConfigError:
        ranker = prior
    return _top_hits(_examples(prepared, held, history=history, rows_of={}, hidden=hidden), ranker)


def ranker_fitted_for(engine: LiveEngine, taxonomy: Taxonomy) -> ServingRanker:
    """The ranker ``engine`` would serve with once fitted for it on every verdict, as the worker
    fits one seconds after a model goes live (not stored, not gated); its prior, the starter
    ranker, where the judged texts are too few to fit on."""
    prior = engine_prior(engine)
    judged = judged_texts(taxonomy)
    if sum(j.group_id is not None for j in judged) < MIN_EXAMPLES:
        return prior
    prepared = _prepare(engine, taxonomy, judged)
    everyone = range(len(judged))
    history, rows_of = _history(prepared, everyone, Group.objects.filter(taxonomy=taxonomy).count())
    try:
        ranker = fit_ranker(
            _examples(prepared, everyone, history=history, rows_of=rows_of), prior=prior.ranker
        )
    except ConfigError:
        return prior
    return ServingRanker(ranker, history, None, engine.model_version_id)


def held_out_served_hits(
    taxonomy: Taxonomy, engines: list[LiveEngine], held_out: Collection[str]
) -> list[list[bool]] | None:
    """What users would see for the held-out judged texts (comparison keys in ``held_out``)
    from each engine, paired: per engine, per held-out text with a group, whether the engine
    with a ranker fitted for it on every other verdict (the starter ranker where those are too
    few to fit) puts the curators' group first. The fine-tune gate's comparison of served pairs:
    a candidate model goes live with a ranker fitted for it, not alone. None when no held-out
    text has a group."""
    judged = judged_texts(taxonomy)
    held = [row for row, j in enumerate(judged) if j.key in held_out and j.group_id is not None]
    if not held:
        return None
    rest = [row for row, j in enumerate(judged) if j.key not in held_out]
    hidden = frozenset(judged[row].key for row in held)
    group_count = Group.objects.filter(taxonomy=taxonomy).count()
    found = []
    for engine in engines:
        prepared, prior = _prepare(engine, taxonomy, judged), engine_prior(engine).ranker
        found.append(_held_out_hits(prepared, held, rest, hidden, prior, group_count=group_count))
    return found


def _store(taxonomy, engine, ranker, history, judged, gate) -> RankerVersion:
    relative = f"{taxonomy.slug}/rankers/{uuid.uuid4().hex}"
    with atomic_directory(artifact_path(relative)) as folder:
        save_ranker(folder, ranker, history)
    promote = gate["decision"] == "promote"
    with transaction.atomic():
        Taxonomy.objects.select_for_update().filter(id=taxonomy.id).first()
        number = (
            RankerVersion.objects.filter(taxonomy=taxonomy).aggregate(n=Max("number"))["n"] or 0
        ) + 1
        deployment = (
            Deployment.objects.select_for_update()
            .filter(taxonomy=taxonomy, index_build__model_version_id=engine.model_version_id)
            .first()
        )
        # The live model changed while this fitted: it ranks for a model no longer served.
        live = promote and deployment is not None
        version = RankerVersion.objects.create(
            taxonomy=taxonomy,
            model_version_id=engine.model_version_id,
            number=number,
            status=RankerVersion.Status.LIVE if live else RankerVersion.Status.REJECTED,
            artifact_path=relative,
            verdicts=len(judged),
            verdicts_until=max(j.last_id for j in judged),
            feature_set=FEATURE_SET,
            metrics=ranker.metrics,
            gate_report=gate,
        )
        if live:
            RankerVersion.objects.filter(
                taxonomy=taxonomy, status=RankerVersion.Status.LIVE
            ).exclude(id=version.id).update(status=RankerVersion.Status.RETIRED)
            deployment.ranker = version
            deployment.save(update_fields=["ranker", "updated_at"])
    logger.info("%s: %s (%s)", version.label, version.status, gate.get("summary", ""))
    rankers_prune(taxonomy=taxonomy, keep=KEEP_RANKERS)
    return version


def rankers_prune(*, taxonomy: Taxonomy, keep: int) -> int:
    """Delete all but the newest ``keep`` rankers of the taxonomy (never the live one), rows
    and folders. Only the live ranker is ever read again: a rollback's model gets a fit of its
    own, and the newest rows still say which verdicts the last fit saw (``rankers_due``)."""
    live_id = Deployment.objects.filter(taxonomy=taxonomy).values_list("ranker_id", flat=True)
    # A running bulk job answers with the ranker it started with to its end.
    pinned = BulkJob.objects.filter(
        taxonomy=taxonomy, status__in=BulkJob.ACTIVE_STATUSES, ranker_pinned__isnull=False
    ).values_list("ranker_pinned", flat=True)
    old = list(
        RankerVersion.objects.filter(taxonomy=taxonomy)
        .exclude(id__in=live_id.exclude(ranker_id=None))
        .exclude(id__in=pinned)
        .order_by("-number")[keep - 1 :]
    )
    for version in old:
        version.delete()
        shutil.rmtree(artifact_path(version.artifact_path), ignore_errors=True)
    return len(old)


def rankers_due() -> list[Taxonomy]:
    """Taxonomies whose live model has no ranker of today's features yet and enough verdicts
    for one, or whose live ranker has ``SIAMWEB_RANKER_REFIT_VERDICTS`` final verdicts new to
    it. A fit that was tried counts (a rejected one too): its verdicts are not new any more."""
    due = []
    for deployment in Deployment.objects.select_related("taxonomy", "ranker", "index_build"):
        model_version_id = deployment.index_build.model_version_id
        verdicts = Judgement.objects.live().filter(
            review_item__taxonomy=deployment.taxonomy, verdict__in=Judgement.FINAL_VERDICTS
        )
        tried = RankerVersion.objects.filter(
            taxonomy=deployment.taxonomy,
            model_version_id=model_version_id,
            feature_set=FEATURE_SET,
        ).aggregate(until=Max("verdicts_until"))["until"]
        if tried is None:
            # No ranker of this model and of today's features: one is due as soon as there
            # are verdicts enough to fit on, and after a refusal, once a newer one is stored.
            refused = deployment.ranker_refused_until
            same_model = deployment.ranker_refused_model_version_id == model_version_id
            if refused is not None and same_model and not verdicts.filter(id__gt=refused).exists():
                continue
            if verdicts.exclude(group=None).count() >= MIN_EXAMPLES:
                due.append(deployment.taxonomy)
        elif verdicts.filter(id__gt=tried).count() >= settings.SIAMWEB_RANKER_REFIT_VERDICTS:
            due.append(deployment.taxonomy)
    return due


def ranker_fit_claim(*, taxonomy: Taxonomy) -> bool:
    """Whether this caller may queue the taxonomy's next fit: one fit a taxonomy is queued or
    running at a time (a conditional update), unless the last claim is older than
    ``SIAMWEB_RANKER_FIT_STALE_SECONDS`` (its worker died)."""
    now = timezone.now()
    stale = now - timezone.timedelta(seconds=settings.SIAMWEB_RANKER_FIT_STALE_SECONDS)
    claimed = (
        Deployment.objects.filter(taxonomy=taxonomy)
        .filter(Q(ranker_fit_queued_at=None) | Q(ranker_fit_queued_at__lt=stale))
        .update(ranker_fit_queued_at=now)
    )
    return claimed == 1


def ranker_fit_release(*, taxonomy: Taxonomy) -> None:
    """The queued fit ended: the next one may be queued."""
    Deployment.objects.filter(taxonomy=taxonomy).update(ranker_fit_queued_at=None)
