"""Normalize texts against a taxonomy's live model: ranked groups with their evidence and the
chance each is right.

Reads only. A curator's verdict on the exact text outranks the model; groups a curator rejected
for that text are never offered; members added since the index was built are searched too. The
rest is ranked by the taxonomy's ranker (``models_app.siamese.ranker``) over the candidates of
every matcher: the served embedding's members, curators' members and the groups' descriptions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import repeat

import numpy as np
from django.conf import settings

from annotations.models import Taxonomy
from models_app.serving.candidate_inputs import candidate_inputs
from models_app.serving.engines import (
    HitsCache,
    LiveEngine,
    NoLiveModel,
    live_engine_ranker_and_revision,
    live_ranker_id,
)
from models_app.serving.rankers import ServingRanker, serving_ranker
from models_app.serving.reads import group_names, normalization_rows, taxonomy_revision
from models_app.siamese.ranker.candidates import CandidateBatch, SearchedTexts, candidates_of_texts
from models_app.siamese.text import comparison_key

# Answers below this probability are flagged for a closer look.
LOW_CONFIDENCE = 0.5
# Groups whose probability is within this of the top group's are tied with it: on real titles
# nobody judged, the top group of answers this close was not right significantly more often
# than the runner-up (bench/starter_ranker.py, "tie gaps"), so a curator should choose.
TIE_GAP = 0.02
# Without a probability (no calibrated ranker can be read), ranker scores this close are tied.
TIE = 1e-6


def probability_as_shown(probability):
    """A probability (or an array of them) as pages show it: stored to four places, then two,
    half up as Django's ``floatformat`` does. Ties are decided on these figures, so two groups
    showing 0.15 and 0.14 are tied and 0.16 and 0.14 are not, whatever the digits behind."""
    stored = np.round(np.asarray(probability, np.float64), 4)
    # The nudge keeps a stored half (0.145 is 14.4999... hundredths in binary) rounding up.
    return np.floor(stored * 100 + 0.5 + 1e-7) / 100


def tied_as_shown(top, probability):
    """Whether ``probability`` is within ``TIE_GAP`` of ``top`` as both are shown (a numpy
    bool, or an array of them)."""
    return probability_as_shown(top) - probability_as_shown(probability) < TIE_GAP - 1e-9


# Groups each matcher proposes for a text, from the text's first ``SIAMWEB_RANKER_DEPTH`` member
# hits: the candidates the ranker's fit saw. A text is always ranked over these, so its first
# groups and their probabilities are the same whatever k is asked; past them, a deeper search
# adds groups with no probability.
CANDIDATES_PER_MATCHER = 15


@dataclass(frozen=True)
class RankedGroup:
    group_id: int
    code: str
    name: str
    # The similarity of the group's best member to the text (0 for a group proposed by its
    # description alone): evidence, not a probability.
    score: float
    member_id: int | None
    member: str | None
    source: str  # "curator" when a verdict on this very text put it here, else "model"
    # The chance this group is right, from the taxonomy's calibrated ranker (the starter
    # ranker before the taxonomy's own verdicts); None for a curator's answer.
    probability: float | None = None
    # Tied with the top group: their probabilities, as shown, are too close to tell apart
    # (``tied_as_shown``).
    tied: bool = False

    def as_dict(self) -> dict:
        # What ``dataclasses.asdict`` gives, built directly: asdict deep-copies each field,
        # which cost a batch of 1,000 texts more than ranking their groups.
        return {
            "group_id": self.group_id,
            "code": self.code,
            "name": self.name,
            "score": self.score,
            "probability": self.probability,
            "member_id": self.member_id,
            "member": self.member,
            "source": self.source,
            "tied": self.tied,
        }


@dataclass(frozen=True)
class Normalization:
    text: str
    groups: list[RankedGroup]
    source: str  # where the top group came from
    model_version: str
    model_version_id: int
    # The chance the top group is right (see RankedGroup.probability).
    probability: float | None = None
    # The top group is tied with the next (``RankedGroup.tied``): the order between them is
    # not to be trusted, and a curator should choose.
    tied: bool = False
    # Curators said none of the taxonomy's groups fits this very text: no group is offered.
    none_of_these: bool = False

    @property
    def low_confidence(self) -> bool:
        """Less likely right than not; without a probability (no calibrated ranker could be
        read), only an answer with no evidence at all: its best group's similarity is zero or
        less."""
        if self.probability is not None:
            return self.probability < LOW_CONFIDENCE
        return bool(self.groups) and self.source == "model" and self.groups[0].score <= 0.0

    def as_dict(self) -> dict:
        return {
            "text": self.text,
            "source": self.source,
            "model_version": self.model_version,
            "probability": self.probability,
            "low_confidence": self.low_confidence,
            "tied": self.tied,
            "none_of_these": self.none_of_these,
            "groups": [group.as_dict() for group in self.groups],
        }


def rank_taxonomy_groups(
    taxonomy: Taxonomy,
    texts: Sequence[str],
    *,
    k: int,
    engine: LiveEngine | None = None,
    ranker: ServingRanker | None = None,
    hits_cache: HitsCache | None = None,
) -> list[Normalization]:
    """Rank the ``k`` best groups for each (already cleaned) text.

    ``engine``: the model and index to answer with (a bulk job pins the one it started with),
    ``ranker`` the ranker beside it (by default the live one, or the engine's prior when the
    live one ranks for another model); by default the taxonomy's live pair. One encode and one
    index search for the batch, and a fixed number of queries whatever its size; a text
    repeated in the batch is ranked once. ``hits_cache``: nearest members of texts seen in
    earlier batches (``HitsCache``). Verdicts, rejected groups and hit members' rows are kept
    per process while the taxonomy's revision stays (``reads.normalization_rows``): a batch
    reads one row unless it moved or hits members this process has not read yet.
    """
    ranker_id = None
    # The taxonomy's revision, read before the rows it vouches for: rows read after it are at
    # least as new.
    if engine is None:
        engine, ranker_id, revision = live_engine_ranker_and_revision(taxonomy)
        if engine is not None and ranker is None:
            ranker = serving_ranker(engine, ranker_id)
    else:
        revision = taxonomy_revision(taxonomy.id)
    if engine is None:
        raise NoLiveModel(taxonomy)
    if ranker is None:
        # A pinned engine answers with the live ranker while it ranks for the same model.
        ranker = serving_ranker(engine, live_ranker_id(taxonomy))
    if not texts:
        return []
    unique = list(dict.fromkeys(texts))
    keys = [comparison_key(text) for text in unique]
    depth = max(k * settings.SIAMWEB_MEMBERS_PER_GROUP, settings.SIAMWEB_RANKER_DEPTH)
    hits, vectors = engine.search_texts(unique, depth, cache=hits_cache, revision=revision)

    # Each member's group, text, source and its group's code and name (the hit members', then
    # those curators put these very texts in), and the groups rejected for these texts.
    member_ids = {m for row in hits for m, _ in row}
    read = normalization_rows(taxonomy.id, member_ids, set(keys), revision=revision)
    members = read.members
    searched, evidence = candidate_inputs(
        engine, taxonomy.slug, SearchedTexts(unique, vectors, hits, members), history=ranker.history
    )

    confirmed = [read.verdict_groups.get(key, []) for key in keys]
    # Confirmed groups are already first; rejected ones are never offered for this text.
    excluded = [
        frozenset(read.rejected.get(key, set()) | {g for g, _ in groups_said})
        for key, groups_said in zip(keys, confirmed, strict=True)
    ]
    # Ranked over the hits and candidates the ranker was fitted on, whatever k is.
    ranked_over = searched
    if depth > settings.SIAMWEB_RANKER_DEPTH:
        ranked_over = replace(
            searched, hits=[row[: settings.SIAMWEB_RANKER_DEPTH] for row in searched.hits]
        )
    answers = _ranked(
        ranked_over, evidence, excluded, confirmed, ranker, k, per_matcher=CANDIDATES_PER_MATCHER
    )
    short = [row for row, (groups, _) in enumerate(answers) if len(groups) < k]
    if ranked_over is not searched and short:
        # Only the texts whose candidates ran out are searched deeper.
        deeper = _ranked(
            searched.at(short),
            evidence,
            [excluded[row] for row in short],
            [confirmed[row] for row in short],
            ranker,
            k,
            per_matcher=k,
        )
        for row, more in zip(short, deeper, strict=True):
            answers[row] = _extended(answers[row], more, k)

    names = _group_names(taxonomy.id, members, answers, revision)
    by_text = {}
    for text, key, (ranked, tied) in zip(unique, keys, answers, strict=True):
        if key in read.none_of_these and not read.verdict_groups.get(key):
            # The curators' answer from the moment it is stored, as a group they chose is.
            by_text[text] = Normalization(
                text=text,
                groups=[],
                source="curator",
                model_version=engine.model_label,
                model_version_id=engine.model_version_id,
                none_of_these=True,
            )
            continue
        ranked_groups = [
            RankedGroup(
                group_id=group_id,
                code=names[group_id][0],
                name=names[group_id][1],
                score=round(score, 4),
                member_id=member_id,
                member=members[member_id][1] if member_id is not None else None,
                source=source,
                probability=None if probability is None else round(probability, 4),
                tied=group_tied,
            )
            for group_id, score, member_id, source, probability, group_tied in ranked
            if group_id in names
        ]
        top = ranked_groups[0] if ranked_groups else None
        by_text[text] = Normalization(
            text=text,
            groups=ranked_groups,
            source=top.source if top else "model",
            model_version=engine.model_label,
            model_version_id=engine.model_version_id,
            probability=top.probability if top else None,
            tied=tied,
        )
    return [by_text[text] for text in texts]


def _ranked(searched, evidence, excluded, confirmed, ranker: ServingRanker, k: int, *,
            per_matcher: int):  # fmt: skip
    """``_answers`` over the candidates each matcher proposes ``per_matcher`` groups of."""
    candidates = candidates_of_texts(searched, evidence, excluded=excluded, per_matcher=per_matcher)
    # One ranker pass for the batch: standardising each text's few candidates apart cost more
    # than the arithmetic.
    scores = ranker.ranker.scores(candidates.features) if len(candidates.groups) else np.zeros(0)
    return _answers(confirmed, candidates, scores, ranker, k)


def _extended(answer, deeper, k: int):
    """``answer``, ranked over the candidates the ranker was fitted on, then the other groups of
    ``deeper`` (the same text ranked over more candidates) in its order, up to ``k``. They come
    with no probability: the ranker's probability shares out a text's candidates, and these
    were not among them."""
    groups, tied = answer
    shown = {group_id for group_id, *_ in groups}
    more = [(group_id, score, member_id, source, None, False)
            for group_id, score, member_id, source, _, _ in deeper[0]
            if group_id not in shown]  # fmt: skip
    return groups + more[: k - len(groups)], tied


def _answers(confirmed, candidates: CandidateBatch, scores, ranker: ServingRanker, k: int):
    """Per text its ``k`` best (group, similarity, member, source, probability, tied) and
    whether its top group is tied with the next (``scores``: the ranker's, one a candidate):
    ordered, tied and cut for the whole batch at once."""
    count = len(confirmed)
    starts, text = candidates.starts, candidates.text
    sizes = starts[1:] - starts[:-1]
    filled = sizes > 0
    firsts = starts[:-1][filled]  # where each text with candidates starts, in either order
    best = np.zeros(count, np.float32)
    if len(firsts):
        best[filled] = np.maximum.reduceat(candidates.similarity, firsts)
    probabilities = ranker.ranker.probabilities_of_texts(scores, starts, best)
    # Best score first within each text; equal scores keep the candidates' order (the served
    # embedding's).
    order = np.lexsort((-scores, text))
    text = text[order]
    if probabilities is not None:
        shown = probabilities[order]
        tied = tied_as_shown(shown[starts[text]], shown)
    else:
        closeness = scores[order]
        tied = closeness[starts[text]] - closeness < TIE
    # A top group is tied when its runner-up is.
    tied[firsts] = (sizes[filled] > 1) & tied[np.minimum(firsts + 1, len(tied) - 1)]
    said = np.fromiter(map(len, confirmed), np.int64, count)
    # A curator's verdict on this very text is the answer: nothing to choose.
    if said.any():
        tied &= (said == 0)[text]
    # Each text's first k (less its curators' groups) in that order.
    taken = np.minimum(sizes, np.maximum(k - said, 0))
    kept = np.arange(len(order)) - starts[text] < taken[text]
    chosen = order[kept]
    members = candidates.members[chosen]
    member_ids = members.astype(object)
    member_ids[members < 0] = None
    rows = list(
        zip(
            candidates.groups[chosen].tolist(),
            candidates.similarity[chosen].tolist(),
            member_ids.tolist(),
            repeat("model"),
            probabilities[chosen].tolist() if probabilities is not None else repeat(None),
            tied[kept].tolist(),
            strict=False,
        )
    )
    bounds = [0, *taken.cumsum().tolist()]
    text_tied = np.zeros(count, bool)
    text_tied[filled] = tied[firsts]
    answers = []
    for said_here, start, end, top_tied, any_candidate in zip(
        confirmed, bounds[:-1], bounds[1:], text_tied.tolist(), filled.tolist(), strict=True
    ):
        first = [(group_id, 1.0, member_id, "curator", None, False)
                 for group_id, member_id in said_here]  # fmt: skip
        answers.append((first + rows[start:end] if any_candidate else first[:k], top_tied))
    return answers


def _group_names(taxonomy_id, members, answers, revision) -> dict[int, tuple[str, str]]:
    """Code and name of every answered group: from the members read where a member of it was,
    else read (a group proposed by its description alone)."""
    answered = {group_id for ranked, _ in answers for group_id, *_ in ranked}
    names = {}
    for group_id, _, code, name, _ in members.values():
        if group_id in answered:
            names[group_id] = (code, name)
    missing = answered - names.keys()
    if missing:
        names.update(group_names(taxonomy_id, missing, revision=revision))
    return names
