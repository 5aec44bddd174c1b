"""What the ranker's candidates are computed from (``candidates_of_texts``' inputs), built one way
for serving and fitting alike: the searched texts, and what the taxonomy gives them as the live
engine sees it (its groups' names and descriptions, the engine's lexical cache) with a verdict
history.

The two differ in what each text is measured without. Serving measures a text with everything
(the groups rejected for it are left out later, as ``candidates_of_texts``' ``excluded``).
Fitting measures each judged text without its own verdict: its curator members, and those of
the texts the gate holds out, are left out of its hits (``left_out``), and its verdict out of
the history (``candidates_of_texts``' ``own``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from models_app.serving.engines import LiveEngine
from models_app.serving.groups import engine_group_facts
from models_app.siamese.ranker.candidates import SearchedTexts, TaxonomyEvidence
from models_app.siamese.ranker.verdict_history import VerdictHistory
from models_app.siamese.text import comparison_key


def candidate_inputs(
    engine: LiveEngine,
    taxonomy_slug: str,
    searched: SearchedTexts,
    *,
    history: VerdictHistory | None,
    left_out: Sequence[Collection[str]] | None = None,
    depth: int | None = None,
) -> tuple[SearchedTexts, TaxonomyEvidence]:
    """``searched`` as the candidates read it, and the taxonomy's evidence as ``engine`` sees it
    with ``history``. ``left_out``: per text the comparison keys of judged texts whose curator
    members are dropped from its hits; the hits left are cut to ``depth`` (fitting searches
    deeper, so that as many are left)."""
    evidence = TaxonomyEvidence(
        groups=engine_group_facts(engine, taxonomy_slug), history=history, lexical=engine.lexical
    )
    if left_out is None:
        return searched, evidence
    members = searched.members
    judged_text = {
        member_id: comparison_key(members[member_id].text)
        for row in searched.hits
        for member_id, _ in row
        if member_id in members and members[member_id].curator
    }
    hits = [
        [(member, score) for member, score in row if judged_text.get(member) not in out][:depth]
        for row, out in zip(searched.hits, left_out, strict=True)
    ]
    return replace(searched, hits=hits), evidence
