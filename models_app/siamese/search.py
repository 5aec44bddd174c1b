"""Finding the nearest members of a query: the embedding alone, or beside the trigram matcher.

With ``lexical_weight`` w > 0 a member scores ``(1 - w) * cos + w * lexical`` where ``lexical``
is the paper's trigram score divided by the best among the members the term may lift (see
``baselines.TrigramMatcher``): those whose cosine is within ``lexical_window`` of the query's
best. The embedding captures what string overlap cannot (synonyms, reordered words, and what a
fine-tune learnt from curators); the trigram term forgives typos and ignores words appended
around a title, where mean-pooled embeddings dilute. Inside the window it breaks the
embedding's near ties; outside it, it cannot overturn a clear embedding answer. The figures
behind both defaults are in docs/benchmarks.md (bench/accuracy.py, bench/corrigibility_onet.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models_app.siamese.artifacts import ArtifactError
from models_app.siamese.baselines import TrigramMatcher, top_k_stable, trigrams
from models_app.siamese.configs import ConfigError, check_field_types
from models_app.siamese.exact_cosines import EXACT_ARTIFACT, ExactCosines, cosines, true_pairs
from models_app.siamese.index import MemberIndex
from models_app.siamese.mapped import mapped_arrays

TRIGRAM_ARTIFACT = "trigrams"


@dataclass(frozen=True)
class SearchConfig:
    lexical_weight: float = 0.3
    # The trigram term lifts only members whose cosine is within this of the query's best
    # member: the embedding proposes, string overlap breaks near ties. With 2 (cosines differ
    # by at most 2) it lifts every member and the query's best trigram match takes the full
    # bonus however far the embedding puts it, which overrode what a fine-tune learnt from
    # curators' corrections: a corrected input usually shares words with the wrong group.
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


# Members beyond the depth a query's near set reaches: ties at the depth's edge (O*NET lists one
# title under several occupations) rarely reach past them.
_NEAR_SLACK = 8
# How much deeper the next near set of a query whose near set did not hold goes. On real job
# titles against O*NET 4% of queries need a second one (near-duplicate titles crowd the
# window); scoring those against every member instead cost a tenth of a batch's time.
_NEAR_WIDENING = 8


def best_first(hit: tuple[int, float]) -> tuple[int, int]:
    """Sort key of hits: higher score first, then lower member id.

    A title shared by several groups (O*NET lists many alternate titles under more than one
    occupation) is a member of each, so those members score exactly alike, and the first of
    them decides the group (``rank_groups``). Without the member id that was whichever the
    index or the list of members added since its build yielded first, which changes with every
    rebuild: the same model would answer an input with another group after a reindex than on
    arrival (docs/decisions/performance-choices.md).
    """
    member_id, score = hit
    # Compared in millionths: a score's last bits depend on the product that computed it (a
    # query alone or in a batch, an indexed member or one added since the build), and members
    # that close are tied, for the member id to order. ``score_keys`` is the same in numpy.
    return -round(score * 1_000_000), member_id


# Members within this of the depth's last score are kept as candidates before ``best_first``
# chooses the depth's best: a score's last bits depend on the product's shape, and a member
# that ties the last one to the millionth must be chosen by its id, never by those bits.
EDGE_SLACK = 1e-6


def best_extra(ids: np.ndarray, scores: np.ndarray, depth: int) -> Hits:
    """The members added since the build that can be among a query's ``depth`` best: those at
    or within ``EDGE_SLACK`` of the depth-th best of them (``best_first`` then chooses). All of
    them went into a per-query sort in Python, minutes for a ranker fit on 10,000 verdicts
    judged since the last reindex."""
    if len(scores) > depth > 0:
        edge = np.partition(-scores, depth - 1)[depth - 1]
        keep = np.flatnonzero(-scores <= edge + EDGE_SLACK)
        ids, scores = ids[keep], scores[keep]
    elif depth <= 0:
        return []
    return list(zip(ids.tolist(), scores.tolist(), strict=True))


def score_keys(scores: np.ndarray) -> np.ndarray:
    """``best_first``'s score part of each score, negated back: the same rounding (half to
    even, of the same float64 product)."""
    return np.rint(np.asarray(scores, dtype=np.float64) * 1_000_000)


def trigram_tables(texts: Sequence[str], folder: Path | None = None) -> TrigramMatcher:
    """The trigram matcher of an index's member ``texts`` (labelled by position). With
    ``folder`` (the index's own), read from memory-mapped files in it, one set of tables for
    each list of texts (a member deleted since the build reads as blank), written there first
    by whichever process needs them first; without, computed in memory."""
    if folder is None:
        return TrigramMatcher(list(texts), list(range(len(texts))))
    digest = hashlib.sha256()
    for text in texts:
        encoded = text.encode("utf-8")
        digest.update(len(encoded).to_bytes(4, "little") + encoded)
    tables = Path(folder) / f"{TRIGRAM_ARTIFACT}-{digest.hexdigest()[:16]}"
    arrays = mapped_arrays(
        tables, of=TRIGRAM_ARTIFACT, compute=lambda: trigram_tables(texts).arrays()
    )
    try:
        matcher = TrigramMatcher.from_arrays(arrays)
    except KeyError as exc:
        raise ArtifactError(f"{tables} does not hold trigram tables: no {exc}") from None
    if len(matcher) != len(texts):
        raise ArtifactError(
            f"{tables} holds the trigrams of {len(matcher)} texts, not {len(texts)}; delete it "
            "to have it written again"
        )
    return matcher


def exact_tables(index: MemberIndex, folder: Path | None = None) -> ExactCosines | None:
    """The cosine tables ``MemberSearch`` scores an exact index with; None for an approximate
    or empty index. With ``folder`` (the index's own), read from memory-mapped files in it,
    written there first by whichever process needs them first; without, computed in memory."""
    if index.kind != "flat" or not len(index):
        return None
    if folder is None:
        return ExactCosines(index.vectors())
    return ExactCosines.mapped(
        Path(folder) / EXACT_ARTIFACT, index.vectors, size=len(index), dim=index.dim
    )


class MemberSearch:
    """Scores members of one index; ``texts`` are the indexed members' strings, in id order of
    ``index.member_ids()``, needed only when the lexical term is on. ``tables``: the index's
    folder, where its exact-cosine and trigram tables are kept memory-mapped (``exact_tables``,
    ``trigram_tables``)."""

    def __init__(
        self,
        index: MemberIndex,
        texts: Sequence[str],
        config: SearchConfig,
        *,
        tables: Path | None = None,
    ) -> None:
        self.index, self.config = index, config
        self.ids = index.member_ids()
        self._order: np.ndarray | None = None  # argsort of ids, made on first use
        self.lexical = config.lexical_weight > 0 and len(self.ids) > 0
        # An exact index is searched by one float32 product a batch (``ExactCosines``); an
        # approximate one by FAISS.
        self.exact = exact_tables(index, tables)
        if self.lexical:
            if len(texts) != len(self.ids):
                raise ValueError(f"{len(self.ids)} indexed members but {len(texts)} texts")
            self.trigrams = trigram_tables(texts, tables)

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
        if not self.lexical and self.exact is None:
            return self._embedding_only(vectors, depth, extra_ids, extra_vectors)
        results = []
        for start in range(0, len(queries), COSINE_CHUNK):
            chunk = vectors[start : start + COSINE_CHUNK]
            chunk_queries = queries[start : start + COSINE_CHUNK]
            if not self.lexical:
                results += self._embedding_flat(chunk, depth, extra_ids, extra_vectors)
            elif self.exact is not None:
                results += self._hybrid_flat(
                    chunk_queries, chunk, depth, extra_ids, extra_texts, extra_vectors
                )
            else:
                for query, vector in zip(chunk_queries, chunk, strict=True):
                    hits = self._hybrid(query, vector, depth, extra_ids, extra_texts, extra_vectors)
                    hits.sort(key=best_first)
                    results.append(hits[:depth])
        return results

    def _embedding_flat(self, vectors, depth, extra_ids, extra_vectors) -> list[Hits]:
        """The embedding alone over an exact index, for a chunk of queries: the depth's best
        of each and every member tied with the last of them (``best_first`` chooses)."""
        count, take = len(vectors), min(depth, len(self.ids))
        if not take:
            rows, members = np.zeros(0, np.int64), np.zeros(0, np.int64)
            scores = np.zeros(0, np.float32)
        else:
            rows, members, scores, _ = self.exact.near(vectors, take, slack=EDGE_SLACK)
        extra: list[Hits] = [[] for _ in range(count)]
        if len(extra_ids):
            extra_cosines = cosines(vectors, extra_vectors)  # (Q, E)
            extra = [best_extra(extra_ids, row, depth) for row in extra_cosines]
        return self._hits_by_row(rows, members, scores, extra, depth)

    def _hits_by_row(self, rows, positions, scores, extra: list[Hits], depth: int) -> list[Hits]:
        """Per query of a chunk, its ``depth`` best (member id, score) hits, ``best_first``,
        of pairs sorted by row and the hits ``extra`` holds for it. Ordered in numpy: a key
        function called per hit took a tenth of a batch's time."""
        ids = self.ids[positions]
        order = np.lexsort((ids, -score_keys(scores), rows))
        rows = rows[order]
        ids, scores = ids[order].tolist(), scores[order].tolist()
        bounds = np.searchsorted(rows, np.arange(len(extra) + 1)).tolist()
        results = []
        for row, more in enumerate(extra):
            start, end = bounds[row], bounds[row + 1]
            if more:
                hits = list(zip(ids[start:end], scores[start:end], strict=True)) + more
                hits.sort(key=best_first)
                results.append(hits[:depth])
            else:
                end = min(end, start + depth)
                results.append(list(zip(ids[start:end], scores[start:end], strict=True)))
        return results

    def _embedding_only(self, vectors, depth, extra_ids, extra_vectors) -> list[Hits]:
        """The embedding alone over an approximate index: one FAISS call for every query of
        the batch, then the extra members merged in.

        FAISS is asked for one member more than ``depth``: where that one ties with the
        depth-th, FAISS chose among tied members, so that query looks at every member and
        ``best_first`` chooses instead.
        """
        total = len(self.ids)
        if depth <= 0:
            return [[] for _ in range(len(vectors))]
        keep = max(1, min(depth, total))
        fetch = max(1, min(total, keep + 1))
        # IVF scores each query by itself: a batch changes no query's sums.
        scores, ids = self.index.search(vectors, fetch)
        found = [(ids[row], scores[row]) for row in range(len(vectors))]
        if fetch > keep:
            edge_tied = (ids[:, keep] >= 0) & (scores[:, keep] == scores[:, keep - 1])
            for row in np.flatnonzero(edge_tied):
                every_scores, every_ids = self.index.search(vectors[row : row + 1], total)
                tied_or_better = int((every_scores[0] >= scores[row, keep - 1]).sum())
                found[row] = (every_ids[0][:tied_or_better], every_scores[0][:tied_or_better])
        results = []
        for row, (row_ids, row_scores) in enumerate(found):
            hits = [(int(m), float(s)) for m, s in zip(row_ids, row_scores, strict=True) if m >= 0]
            if len(extra_ids):
                extra = extra_vectors @ vectors[row]  # (E,): per query, as alone
                hits += best_extra(extra_ids, extra, depth)
            hits.sort(key=best_first)
            results.append(hits[:depth])
        return results

    def _hybrid_flat(
        self, queries, vectors, depth, extra_ids, extra_texts, extra_vectors
    ) -> list[Hits]:
        """``_hybrid``'s scoring over an exact index for a chunk of queries at once, each query
        getting the hits it gets on its own (scores to 1e-6).

        Scoring every member for each query takes several passes (trigram counts, the window,
        the partition). Here each query's near set (``ExactCosines.near``) gives a threshold
        that a few more than ``depth`` members reach; when the threshold is
        outside the window and, unlifted, below the depth's last score, the window and the
        depth's best are all among those members and trigrams are counted for them alone. A
        query where either fails (a wide window, a tie at the edge) is tried again with a near
        set ``_NEAR_WIDENING`` times as deep while that costs less than scoring every member,
        and past that is scored against every member (``_hybrid_rows``).
        """
        extra = self._extra_terms(queries, vectors, extra_texts, extra_vectors)
        reach = min(depth, len(self.ids)) + _NEAR_SLACK
        return self._hybrid_near(queries, vectors, extra, depth, extra_ids, reach)

    def _hybrid_near(self, queries, vectors, extra, depth, extra_ids, reach) -> list[Hits]:
        """``_hybrid_flat`` with near sets of ``reach`` members."""
        count, size = len(vectors), len(self.ids)
        take = min(depth, size)
        if reach >= size or not take:
            return self._hybrid_rows(queries, self.exact.all(vectors), extra, depth, extra_ids)
        w, window = self.config.lexical_weight, self.config.lexical_window
        # Each query's near set: the members at or above its ``reach``-th best cosine, the
        # threshold (more than ``reach`` where members tie with it), (P,) by query.
        rows, members, near, threshold = self.exact.near(vectors, reach)
        starts = np.searchsorted(rows, np.arange(count + 1))
        best_cosine = np.maximum.reduceat(near, starts[:-1])  # (Q,)
        if len(extra_ids):  # a loop a query: skipped while no member was added since the build
            for row, (extra_cosine, _) in enumerate(extra):
                best_cosine[row] = max(best_cosine[row], extra_cosine.max(initial=-np.inf))
        floor = best_cosine - window  # (Q,) float32, as ``_hybrid`` subtracts it
        eligible = np.flatnonzero(near >= floor[rows])
        lexical = self.trigrams.pair_scores(queries, rows[eligible], members[eligible])
        lexical = lexical.astype(np.float32)
        scale, extra_scores = self._lexical_scale(
            rows[eligible], lexical, floor, extra, extra_ids, depth
        )
        combined = (1 - w) * near  # (P,)
        combined[eligible] += w * np.clip(lexical * scale[rows[eligible]], 0, 1)
        # The depth's last score of each query: its take-th best among its near members.
        order = np.lexsort((-combined, rows))
        edge = combined[order[starts[:-1] + take - 1]]  # (Q,)
        # A member beyond the threshold has a cosine below it and no lift: outside the window,
        # and scoring below the depth's last, it cannot be among the best or tie with them.
        wide = (threshold >= floor - EDGE_SLACK) | ((1 - w) * threshold >= edge - EDGE_SLACK)
        top = np.flatnonzero(combined >= edge[rows] - EDGE_SLACK)
        results = self._hits_by_row(rows[top], members[top], combined[top], extra_scores, depth)
        if wide.any():
            again = np.flatnonzero(wide)
            # A near set gathers 2 x reach x D float64 values a query, every member's cosines
            # N: past N / D the full pass is the cheaper one, in memory and in time.
            deeper = reach * _NEAR_WIDENING
            if deeper > size / vectors.shape[1]:
                deeper = size
            found = self._hybrid_near(
                [queries[row] for row in again], vectors[again], [extra[row] for row in again],
                depth, extra_ids, deeper,
            )  # fmt: skip
            for row, hits in zip(again, found, strict=True):
                results[row] = hits
        return results

    def _hybrid_rows(self, queries, cosine, extra, depth, extra_ids) -> list[Hits]:
        """``_hybrid_flat`` for queries whose every member is scored: (Q, N) passes."""
        w, window = self.config.lexical_weight, self.config.lexical_window
        size = cosine.shape[1]
        best_cosine = cosine.max(axis=1)  # (Q,)
        if len(extra_ids):
            for row, (extra_cosine, _) in enumerate(extra):
                best_cosine[row] = max(best_cosine[row], extra_cosine.max(initial=-np.inf))
        floor = best_cosine - window
        rows, members = true_pairs(cosine >= floor[:, None])  # the eligible pairs, (P,)
        lexical = self.trigrams.pair_scores(queries, rows, members).astype(np.float32)  # (P,)
        scale, extra_scores = self._lexical_scale(rows, lexical, floor, extra, extra_ids, depth)
        combined = (1 - w) * cosine  # (Q, N): members outside the window get no lift
        combined[rows, members] += w * np.clip(lexical * scale[rows], 0, 1)
        take = min(depth, size)
        if take:
            # As in ``_hybrid``: the depth's best and every member tied with the last of them.
            negated = -combined
            edge = np.partition(negated, take - 1, axis=1)[:, take - 1]  # (Q,)
            top_rows, top_members = true_pairs(negated <= edge[:, None] + EDGE_SLACK)
        else:
            top_rows = top_members = np.zeros(0, np.int64)
        return self._hits_by_row(
            top_rows, top_members, combined[top_rows, top_members], extra_scores, depth
        )

    def _lexical_scale(self, rows, lexical, floor, extra, extra_ids, depth):
        """Per query the trigram term's scale (one over the best lexical score the window holds)
        and the hits of the members added since the build, scored as ``_hybrid`` scores them
        (those that can be among the ``depth`` best: ``best_extra``)."""
        w = self.config.lexical_weight
        best = np.zeros(len(floor), np.float32)
        np.maximum.at(best, rows, lexical)
        if len(extra_ids):  # loops a query: skipped while no member was added since the build
            for row, (extra_cosine, extra_lexical) in enumerate(extra):
                lifted = extra_lexical[extra_cosine >= floor[row]]
                best[row] = max(best[row], lifted.max(initial=0.0))
        scale = np.zeros(len(floor), np.float32)
        np.divide(np.float32(1.0), best, out=scale, where=best > 0)
        if not len(extra_ids):
            return scale, [[] for _ in range(len(floor))]
        extra_scores: list[Hits] = []
        for row, (extra_cosine, extra_lexical) in enumerate(extra):
            lifted = extra_cosine >= floor[row]
            score = (1 - w) * extra_cosine + w * np.clip(extra_lexical * scale[row], 0, 1) * lifted
            extra_scores.append(best_extra(extra_ids, score, depth))
        return scale, extra_scores

    @staticmethod
    def _extra_terms(
        queries, vectors, extra_texts, extra_vectors
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query of a chunk, the (cosines, lexical scores) of the members added since the
        build, (E,) each: their vectors and trigrams prepared once for the chunk."""
        if not len(extra_texts):
            empty = np.zeros(0, np.float32)
            return [(empty, empty)] * len(queries)
        # As the indexed members are scored: a member added since the build scores what it
        # will score once the next build indexes it. Their trigrams are indexed once for the
        # chunk and counted a query at a time, not a set intersection a (query, member) pair.
        matcher = TrigramMatcher(list(extra_texts), list(range(len(extra_texts))))
        cosine = cosines(vectors, extra_vectors)  # (Q, E)
        return [
            (cosine[row], matcher.scores(query).astype(np.float32))
            for row, query in enumerate(queries)
        ]

    def _positions_of(self, member_ids: np.ndarray) -> np.ndarray:
        """Where these members are in ``self.ids`` (each must be there)."""
        if self._order is None:
            self._order = np.argsort(self.ids, kind="stable")
        return self._order[np.searchsorted(self.ids, member_ids, sorter=self._order)]

    def _hybrid(self, query, vector, depth, extra_ids, extra_texts, extra_vectors) -> Hits:
        """One query over an IVF index: the members it proposes, reranked with the lexical term
        beside the best lexical candidates (an exact index goes through ``_hybrid_flat``)."""
        w, window = self.config.lexical_weight, self.config.lexical_window
        query_grams = trigrams(query)
        extra_lexical = np.array(
            [3 * len(query_grams & trigrams(t)) - len(trigrams(t)) for t in extra_texts],
            dtype=np.float32,
        )
        _, found = self.index.search(vector[None, :], depth * 4)
        proposed = self._positions_of(found[0][found[0] >= 0])
        if window < 2:
            # Only members within the window of the embedding's best can be lifted, and those
            # are among the index's proposals unless more than ``depth * 4`` members crowd the
            # window: trigrams are counted for the proposals alone, not for every member (a
            # pass that would grow with the taxonomy).
            candidates = np.unique(proposed).astype(np.int64)
            lexical = self.trigrams.pair_scores(
                [query], np.zeros(len(candidates), np.int64), candidates
            ).astype(np.float32)
        else:
            # Every member may be lifted: the best lexical ones join the proposals (ties:
            # lower position first), without a full sort over every member.
            every = self.trigrams.scores(query).astype(np.float32)  # (N,)
            lexical_top = top_k_stable(every, depth * 4)
            candidates = np.unique(np.concatenate([proposed, lexical_top])).astype(np.int64)
            lexical = every[candidates]
        cosine = self.index.vectors_of(self.ids[candidates]) @ vector
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
            top = np.flatnonzero(negated <= edge + EDGE_SLACK)
        else:
            top = np.zeros(0, np.int64)
        hits = [(int(self.ids[candidates[i]]), float(combined[i])) for i in top]
        if len(extra_ids):
            extra = (1 - w) * extra_cosine + w * np.clip(
                extra_lexical * scale, 0, 1
            ) * extra_eligible
            hits += best_extra(extra_ids, extra, depth)
        return hits
