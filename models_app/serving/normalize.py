"""Normalize texts against a taxonomy's live model: ranked groups with their evidence.

Reads only. A curator's verdict on the exact text outranks the model; groups a curator rejected
for that text are never offered; members added since the index was built are searched too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings

from annotations.models import Taxonomy
from models_app.serving.engines import HitsCache, LiveEngine, NoLiveModel, live_engine
from models_app.serving.probability import taxonomy_calibrator
from models_app.serving.reads import normalization_rows
from models_app.siamese.calibration import LOW_CONFIDENCE
from models_app.siamese.ranking import GroupHit, rank_groups
from models_app.siamese.text import normalize_text


@dataclass(frozen=True)
class RankedGroup:
    group_id: int
    code: str
    name: str
    score: float
    member_id: int
    member: str
    source: str  # "curator" when a verdict on this very text put it here, else "model"

    def as_dict(self) -> dict:
        # What ``dataclasses.asdict`` gives, built directly: asdict deep-copies each field,
        # which cost a batch of 1,000 texts more than ranking their groups.
        return {
            "group_id": self.group_id,
            "code": self.code,
            "name": self.name,
            "score": self.score,
            "member_id": self.member_id,
            "member": self.member,
            "source": self.source,
        }


@dataclass(frozen=True)
class Normalization:
    text: str
    groups: list[RankedGroup]
    source: str  # where the top group came from
    model_version: str
    model_version_id: int
    # The chance the top group is right, calibrated on the taxonomy's verdicts; None for a
    # curator's answer (a verdict on this very text) or before there are verdicts to fit on.
    probability: float | None = None

    @property
    def low_confidence(self) -> bool:
        return self.probability is not None and self.probability < LOW_CONFIDENCE

    def as_dict(self) -> dict:
        return {
            "text": self.text,
            "source": self.source,
            "model_version": self.model_version,
            "probability": self.probability,
            "low_confidence": self.low_confidence,
            "groups": [group.as_dict() for group in self.groups],
        }


def normalize_texts(
    taxonomy: Taxonomy,
    texts: Sequence[str],
    *,
    k: int,
    engine: LiveEngine | None = None,
    hits_cache: HitsCache | None = None,
) -> list[Normalization]:
    """Rank the ``k`` best groups for each (already cleaned) text.

    ``engine``: the model and index to answer with (a bulk job pins the one it started with);
    by default the taxonomy's live one. One encode and one index search for the batch, and a
    fixed number of queries whatever its size; a text repeated in the batch is ranked once.
    ``hits_cache``: nearest members of texts seen in earlier batches (``HitsCache``); groups,
    verdicts and evidence are read afresh each batch all the same.
    """
    if engine is None:
        engine = live_engine(taxonomy)
    if engine is None:
        raise NoLiveModel(taxonomy)
    if not texts:
        return []
    unique = list(dict.fromkeys(texts))
    keys = [normalize_text(text) for text in unique]
    hits = engine.nearest_members(unique, k * settings.SIAMWEB_MEMBERS_PER_GROUP, cache=hits_cache)

    # Each member's group, text and the group's code and name (the hit members', then those
    # curators put these very texts in), the groups rejected for them, the verdicts' key.
    read = normalization_rows(taxonomy.id, {m for row in hits for m, _ in row}, set(keys))
    members, verdict_groups, rejected = read.members, read.verdict_groups, read.rejected
    group_of = {member_id: row[0] for member_id, row in members.items()}

    ranked: list[list[tuple[GroupHit, str]]] = []
    margins: list[float] = []
    for key, row in zip(keys, hits, strict=True):
        confirmed = verdict_groups.get(key, [])
        first = [
            (GroupHit(group_id, 1.0, member_id), "curator") for group_id, member_id in confirmed
        ]
        # Confirmed groups are already first; rejected ones are never offered for this text.
        excluded = frozenset(rejected.get(key, set()) | {g for g, _ in confirmed})
        model = rank_groups(
            row,
            group_of,
            k=max(k, 2),  # the runner-up's score gives the margin the probability reads
            excluded_groups=excluded,
        )
        margins.append(model[0].score - model[1].score if len(model) > 1 else 1.0)
        ranked.append((first + [(hit, "model") for hit in model])[:k])

    calibrator = taxonomy_calibrator(taxonomy, key=read.verdicts_key)
    by_text = {}
    for text, row, margin in zip(unique, ranked, margins, strict=True):
        ranked_groups = [
            RankedGroup(
                group_id=hit.group_id,
                code=members[hit.member_id][2],
                name=members[hit.member_id][3],
                score=round(hit.score, 4),
                member_id=hit.member_id,
                member=members[hit.member_id][1],
                source=source,
            )
            for hit, source in row
        ]
        source = ranked_groups[0].source if ranked_groups else "model"
        probability = None
        if calibrator is not None and ranked_groups and source == "model":
            probability = round(calibrator.probability(ranked_groups[0].score, margin), 4)
        by_text[text] = Normalization(
            text=text,
            groups=ranked_groups,
            source=source,
            model_version=engine.model_label,
            model_version_id=engine.model_version_id,
            probability=probability,
        )
    return [by_text[text] for text in texts]
