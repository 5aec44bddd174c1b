"""The product's search as a ``Matcher`` for the evaluation suite and the gate."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from models_app.siamese.group_hits import GroupHit, rank_groups
from models_app.siamese.index import MemberIndex
from models_app.siamese.search import MemberSearch, SearchConfig


class HybridMatcher:
    """The product's search as a ``Matcher`` for the evaluation suite: an exact index over the
    candidates, ``MemberSearch`` with a version's ``SearchConfig``, groups ranked by their best
    member."""

    def __init__(
        self,
        encoder,
        texts: Sequence[str],
        labels: Sequence[int],
        *,
        config: SearchConfig,
        vectors: np.ndarray | None = None,
    ) -> None:
        """``vectors``: the texts already encoded by ``encoder``, to skip encoding them."""
        self.encoder = encoder
        if vectors is None:
            vectors = encoder.encode(list(texts))
        self.vectors = vectors  # (N, D), row i is texts[i]
        index = MemberIndex.build(self.vectors, np.arange(len(texts)), kind="flat")
        self.search = MemberSearch(index, texts, config)
        self.labels = list(labels)

    def rank(self, queries: Sequence[str], k: int) -> list[list[int]]:
        return [[hit.group_id for hit in hits] for hits in self.rank_hits(queries, k)]

    def rank_hits(self, queries: Sequence[str], k: int) -> list[list[GroupHit]]:
        """The ``k`` best groups of each query, each with the member (its position in
        ``texts``) that gave the group its score."""
        vectors = self.encoder.encode(list(queries))
        depth = min(len(self.labels), k * 50)
        group_of = dict(enumerate(self.labels))
        return [
            rank_groups(hits, group_of, k=k) for hits in self.search.search(queries, vectors, depth)
        ]
