"""Finding the nearest members of a query: the embedding alone, or beside the trigram matcher.

With ``lexical_weight`` w > 0 a member scores ``(1 - w) * cos + w * lexical`` where ``lexical``
is the paper's trigram score divided by the best among the members the term may lift (see
``baselines.TrigramMatcher``): those whose cosine is within ``lexical_window`` of the query's
best. The embedding captures what string overlap cannot (synonyms, reordered words, and what a
fine-tune learnt from curators); the trigram term forgives typos and ignores words appended
around a title, where mean-pooled embeddings dilute. Inside the window it breaks the
embedding's near ties; outside it, it cannot overturn a clear embedding answer. The figures
behind both defaults are in docs/benchmarks.md (bench/accuracy.py, bench/corrigibility.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from models_app.siamese.baselines import TrigramMatcher, trigrams
from models_app.siamese.encoders import ConfigError, check_field_types
from models_app.siamese.index import MemberIndex
from models_app.siamese.ranking import GroupHit, rank_groups


@dataclass(frozen=True)
class SearchConfig:
    lexical_weight: float = 0.3
    # The trigram term lifts only members whose cosine is within this of the query's best
    # member: the embedding proposes, string overlap breaks near ties. With 2 (cosines differ
    # by at most 2) it lifts every member and the query's best trigram match takes the full
    # bonus however far the embedding puts it, which overrode what a fine-tune learnt from
    # curators' corrections: a corrected input usually shares words with the wrong group
    # (bench/corrigibility.py, docs/benchmarks.md).
    lexical_window: float = 0.03

    def __post_init__(self) -> None:
        check_field_types(self)
        if not 0.0 <= self.lexical_weight <= 1.0:
            raise ConfigError("lexical_weight must be in [0, 1]")
        if not 0.0 <= self.lexical_window <= 2.0:
            raise ConfigError("lexical_window must be in [0, 2], a difference of cosines")


Hits = list[tuple[int, float]]  # (member id, score), best first
# Queries whose cosines against a flat index are computed in one product: 256 x 50,000 members
# is 50 MB of scores.
COSINE_CHUNK = 256


def best_first(hit: tuple[int, float]) -> tuple[float, int]:
    """Sort key of hits: higher score first, then lower member id.

    A title shared by several groups (O*NET lists many alternate titles under more than one
    occupation) is a member of each, so those members score exactly alike, and the first of
    them decides the group (``rank_groups``). Without the member id that was whichever the
    index or the list of members added since its build yielded first, which changes with every
    rebuild: the same model answered 22 of 500 realistic inputs with another group after a
    reindex than on arrival; 1 with this order (the "Ties" section of docs/benchmarks.md at
    commit 052a0ce).
    """
    member_id, score = hit
    # Rounded: an indexed member and one added since the build are scored through different
    # products (FAISS or a matrix product against one vector), which can differ in the last bit.
    return -round(score, 6), member_id


class MemberSearch:
    """Scores members of one index; ``texts`` are the indexed members' strings, in id order of
    ``index.member_ids()``, needed only when the lexical term is on."""

    def __init__(self, index: MemberIndex, texts: Sequence[str], config: SearchConfig) -> None:
        self.index, self.config = index, config
        self.ids = index.member_ids()
        self.lexical = config.lexical_weight > 0 and len(self.ids) > 0
        if self.lexical:
            if len(texts) != len(self.ids):
                raise ValueError(f"{len(self.ids)} indexed members but {len(texts)} texts")
            self.trigrams = TrigramMatcher(list(texts), list(range(len(self.ids))))
            self.vectors = index.vectors() if index.kind == "flat" else None  # (N, D)

    def search(
        self,
        queries: Sequence[str],
        vectors: np.ndarray,
        depth: int,
        *,
        extra_ids: np.ndarray | None = None,
        extra_texts: Sequence[str] = (),
        extra_vectors: np.ndarray | None = None,
    ) -> list[Hits]:
        """The ``depth`` best members of each query, including ``extra`` members (added since
        the index was built), which are scored the same way."""
        extra_ids = np.zeros(0, np.int64) if extra_ids is None else extra_ids
        if not self.lexical:
            return self._embedding_only(vectors, depth, extra_ids, extra_vectors)
        results = []
        for start in range(0, len(queries), COSINE_CHUNK):
            chunk = vectors[start : start + COSINE_CHUNK]
            # One matrix product for a chunk of queries instead of one product per query.
            cosines = chunk @ self.vectors.T if self.vectors is not None else [None] * len(chunk)
            for query, vector, cosine in zip(
                queries[start : start + COSINE_CHUNK], chunk, cosines, strict=True
            ):
                hits = self._hybrid(
                    query, vector, cosine, depth, extra_ids, extra_texts, extra_vectors
                )
                hits.sort(key=best_first)
                results.append(hits[:depth])
        return results

    def _embedding_only(self, vectors, depth, extra_ids, extra_vectors) -> list[Hits]:
        """One FAISS call for every query of the batch, then the extra members merged in.

        FAISS is asked for one member more than ``depth``: where that one ties with the
        depth-th, FAISS chose among tied members, so that query looks at every member and
        ``best_first`` chooses instead.
        """
        total = len(self.ids)
        if depth <= 0:
            return [[] for _ in range(len(vectors))]
        keep = max(1, min(depth, total))
        fetch = max(1, min(total, keep + 1))
        scores, ids = self.index.search(vectors, fetch)
        found = [(ids[row], scores[row]) for row in range(len(vectors))]
        if fetch > keep:
            edge_tied = (ids[:, keep] >= 0) & (scores[:, keep] == scores[:, keep - 1])
            for row in np.flatnonzero(edge_tied):
                every_scores, every_ids = self.index.search(vectors[row : row + 1], total)
                tied_or_better = int((every_scores[0] >= scores[row, keep - 1]).sum())
                found[row] = (every_ids[0][:tied_or_better], every_scores[0][:tied_or_better])
        extra = extra_vectors @ vectors.T if len(extra_ids) else None  # (E, Q)
        results = []
        for row, (row_ids, row_scores) in enumerate(found):
            hits = [(int(m), float(s)) for m, s in zip(row_ids, row_scores, strict=True) if m >= 0]
            if extra is not None:
                hits += [(int(m), float(s)) for m, s in zip(extra_ids, extra[:, row], strict=True)]
            hits.sort(key=best_first)
            results.append(hits[:depth])
        return results

    def _hybrid(self, query, vector, cosine, depth, extra_ids, extra_texts, extra_vectors) -> Hits:
        w, window = self.config.lexical_weight, self.config.lexical_window
        lexical = self.trigrams.scores(query).astype(np.float32)  # (N,)
        query_grams = trigrams(query)
        extra_lexical = np.array(
            [3 * len(query_grams & trigrams(t)) - len(trigrams(t)) for t in extra_texts],
            dtype=np.float32,
        )
        if cosine is not None:  # flat index: every member's cosine, (N,)
            candidates = np.arange(len(self.ids))
        else:  # IVF: rerank what the index proposes, plus the best lexical candidates
            _, found = self.index.search(vector[None, :], depth * 4)
            position = {int(m): i for i, m in enumerate(self.ids)}
            lexical_top = np.argsort(-lexical, kind="stable")[: depth * 4]
            candidates = np.unique(
                np.concatenate([[position[int(m)] for m in found[0] if m >= 0], lexical_top])
            ).astype(np.int64)
            cosine = np.zeros(len(self.ids), np.float32)
            cosine[candidates] = self.index.vectors_of(self.ids[candidates]) @ vector
        cosine, lexical = cosine[candidates], lexical[candidates]
        extra_cosine = extra_vectors @ vector if len(extra_ids) else np.zeros(0, np.float32)  # (E,)
        # Which members the trigram term may lift: with a window, only those the embedding
        # already puts within ``window`` of its best (see SearchConfig).
        floor = max(cosine.max(initial=-np.inf), extra_cosine.max(initial=-np.inf)) - window
        eligible, extra_eligible = cosine >= floor, extra_cosine >= floor
        best = max(
            lexical[eligible].max(initial=0.0), extra_lexical[extra_eligible].max(initial=0.0)
        )
        scale = 1.0 / best if best > 0 else 0.0
        combined = (1 - w) * cosine + w * np.clip(lexical * scale, 0, 1) * eligible
        take = min(depth, len(candidates))
        if take:
            # The depth's best and every member tied with the last of them: which of tied
            # members a partition keeps is arbitrary, so ``best_first`` chooses instead.
            negated = -combined  # ascending order of it is best first
            edge = np.partition(negated, take - 1)[take - 1]
            top = np.flatnonzero(negated <= edge)
        else:
            top = np.zeros(0, np.int64)
        hits = [(int(self.ids[candidates[i]]), float(combined[i])) for i in top]
        if len(extra_ids):
            extra = (1 - w) * extra_cosine + w * np.clip(
                extra_lexical * scale, 0, 1
            ) * extra_eligible
            hits += [(int(m), float(s)) for m, s in zip(extra_ids, extra, strict=True)]
        return hits


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
