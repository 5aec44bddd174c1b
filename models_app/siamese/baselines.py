"""Matchers that rank groups for query strings: the paper's trigram baseline and any encoder.

Both implement ``Matcher`` and fold member scores into groups the same way (a group scores as
its best member), so a baseline and a trained model are measured by one evaluator on equal terms.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from models_app.siamese.group_hits import rank_groups
from models_app.siamese.index import MemberIndex
from models_app.siamese.text import comparison_key

if TYPE_CHECKING:  # the encoders module pulls in torch; the trigram baseline does not need it
    from models_app.siamese.encoders import Encoder


class Matcher(Protocol):
    def rank(self, queries: Sequence[str], k: int) -> list[list[int]]:
        """For each query, up to ``k`` distinct labels, best first."""
        ...


def _check_members(texts: Sequence[str], labels: Sequence[int]) -> None:
    if len(texts) != len(labels):
        raise ValueError(f"{len(texts)} texts but {len(labels)} labels")


def trigrams(text: str) -> set[str]:
    """T_X of the paper: the set of character trigrams of the normalized text, no padding.

    The paper defines T_Q as the union of <q_i, q_i+1, q_i+2> for i = 1..M-2, so there are no
    boundary markers and a text shorter than three characters has no trigrams. It says nothing
    about case; the text is normalized (casefolded, spaces collapsed) like every other key here.
    """
    normalized = comparison_key(text)
    return {normalized[i : i + 3] for i in range(len(normalized) - 2)}


class TrigramMatcher:
    """The baseline n-gram matcher of Neculoiu et al. (2016), section 4.1.

    sim(Q, C) = M - match(Q, C), with match(Q, C) = |T_Q △ T_C| - |T_Q ∩ T_C| and M the length
    of the query. Since |A △ B| = |A| + |B| - 2|A ∩ B|,

        sim(Q, C) = M - |T_Q| - |T_C| + 3 |T_Q ∩ T_C|.

    M and |T_Q| are the same for every candidate of one query, so the ranking maximises
    ``3 |T_Q ∩ T_C| - |T_C|``; that is the score this class computes (it differs from the
    paper's sim by a per-query constant). Intersections come from an inverted index, trigram to
    candidate rows, counted with ``np.bincount``: one pass over the postings of the query's
    trigrams, instead of a loop over all candidates.

    A label scores as its best candidate. Ties between labels are broken by the order in which
    labels first appear in ``labels``, so the ranking is deterministic.
    """

    def __init__(self, texts: Sequence[str], labels: Sequence[int]) -> None:
        _check_members(texts, labels)
        grams = [trigrams(text) for text in texts]
        vocabulary: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        for row, text_grams in enumerate(grams):
            for gram in text_grams:
                cols.append(vocabulary.setdefault(gram, len(vocabulary)))
                rows.append(row)
        self._vocabulary = vocabulary
        col_array = np.asarray(cols, dtype=np.int64)
        order = np.argsort(col_array, kind="stable")
        self._postings = np.asarray(rows, dtype=np.int32)[order]  # candidate rows, by trigram
        self._starts = np.searchsorted(col_array[order], np.arange(len(vocabulary) + 1))
        self._sizes = np.asarray([len(g) for g in grams], dtype=np.int32)  # |T_C|
        # The same pairs by candidate (``cols`` was filled row by row): a candidate's trigrams,
        # for scoring chosen (query, candidate) pairs without a pass over every candidate.
        self._grams = col_array.astype(np.int32)
        self._gram_starts = np.concatenate(([0], np.cumsum(self._sizes, dtype=np.int64)))

        # Labels as dense indices in order of first appearance; candidates sorted by label so a
        # label's best candidate is one np.maximum.reduceat away.
        label_array = np.asarray(labels, dtype=np.int64)
        unique, first, dense = np.unique(label_array, return_index=True, return_inverse=True)
        appearance = np.argsort(first, kind="stable")  # unique position -> appearance order
        rank_of_unique = np.empty_like(appearance)
        rank_of_unique[appearance] = np.arange(len(appearance))
        dense = rank_of_unique[dense]
        self._labels = unique[appearance]  # dense index -> label
        self._by_label = np.argsort(dense, kind="stable")
        counts = np.bincount(dense, minlength=len(self._labels))
        self._label_starts = np.concatenate(([0], np.cumsum(counts)[:-1]))

    _ARRAYS = (
        "postings", "starts", "sizes", "grams", "gram_starts", "labels", "by_label", "label_starts"
    )  # fmt: skip

    def arrays(self) -> dict[str, np.ndarray]:
        """Everything it holds, by name, the trigrams' ids as an array of the trigrams in id
        order: ``from_arrays`` makes the same matcher of them."""
        return {
            "vocabulary": np.array(list(self._vocabulary), dtype=str),
            **{name: getattr(self, f"_{name}") for name in self._ARRAYS},
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> TrigramMatcher:
        """The matcher ``arrays()`` described, on those arrays (memory-mapped ones stay so)."""
        matcher = cls.__new__(cls)
        matcher._vocabulary = {gram: i for i, gram in enumerate(arrays["vocabulary"].tolist())}
        for name in cls._ARRAYS:
            setattr(matcher, f"_{name}", arrays[name])
        return matcher

    def __len__(self) -> int:
        return len(self._sizes)

    def scores(self, query: str) -> np.ndarray:
        """``3 |T_Q ∩ T_C| - |T_C|`` for every candidate, shape ``(N,)``."""
        ids = [self._vocabulary[g] for g in trigrams(query) if g in self._vocabulary]
        if ids:
            postings = np.concatenate(
                [self._postings[self._starts[i] : self._starts[i + 1]] for i in ids]
            )
            overlap = np.bincount(postings, minlength=len(self._sizes))
        else:
            overlap = np.zeros(len(self._sizes), dtype=np.int64)
        return 3 * overlap - self._sizes

    def pair_scores(
        self, queries: Sequence[str], rows: np.ndarray, candidates: np.ndarray
    ) -> np.ndarray:
        """``scores(queries[r])[c]`` for each pair ``(r, c)`` of ``rows`` and ``candidates``.

        For a batch that needs a few candidates of each query: the intersections are counted on
        the pairs' own trigrams, not on the postings of every candidate sharing one with the query.
        """
        rows = np.asarray(rows, dtype=np.int64)
        candidates = np.asarray(candidates, dtype=np.int64)
        sizes = self._sizes[candidates].astype(np.int64)  # (P,)
        if not len(candidates):
            return np.zeros(0, np.int64)
        width = len(self._vocabulary)
        # Each query's trigram ids as keys row * width + id, sorted for a binary search.
        keys = [
            row * width + self._vocabulary[g]
            for row, query in enumerate(queries)
            for g in trigrams(query)
            if g in self._vocabulary
        ]
        query_keys = np.sort(np.asarray(keys, dtype=np.int64))
        # Every pair's candidate trigrams, flattened: pair p owns sizes[p] consecutive entries.
        pair = np.repeat(np.arange(len(candidates)), sizes)  # (T,)
        first = np.cumsum(sizes) - sizes  # where each pair's entries start in the flat list
        offsets = np.arange(len(pair)) - first[pair] + self._gram_starts[candidates][pair]
        wanted = rows[pair] * width + self._grams[offsets]
        found = np.searchsorted(query_keys, wanted)
        shared = np.zeros(len(wanted), bool)
        if len(query_keys):
            shared = query_keys[np.minimum(found, len(query_keys) - 1)] == wanted
        overlap = np.bincount(pair[shared], minlength=len(candidates)).astype(np.int64)
        return 3 * overlap - sizes

    def rank(self, queries: Sequence[str], k: int) -> list[list[int]]:
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        if len(self._sizes) == 0:
            return [[] for _ in queries]
        ranked: list[list[int]] = []
        for query in queries:
            best = np.maximum.reduceat(self.scores(query)[self._by_label], self._label_starts)
            ranked.append(self._labels[top_k_stable(best, k)].tolist())
        return ranked


def top_k_stable(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest values, ties by lower index, without sorting everything."""
    if k < len(values):
        threshold = np.partition(values, len(values) - k)[len(values) - k]
        candidates = np.flatnonzero(values >= threshold)  # all ties at the threshold included
    else:
        candidates = np.arange(len(values))
    order = np.argsort(-values[candidates], kind="stable")
    return candidates[order[:k]]


class EncoderMatcher:
    """Any ``Encoder`` with an exact FAISS index over the candidates, ranked like the baseline.

    Members are looked up nearest first and folded into labels with ``rank_groups`` (a label
    scores as its best member), the same rule the product uses. When the first ``k * oversample``
    members do not hold ``k`` distinct labels, the search is widened for those queries until they
    do or every member has been seen.
    """

    def __init__(
        self,
        encoder: Encoder,
        texts: Sequence[str],
        labels: Sequence[int],
        *,
        oversample: int = 8,
        vectors: np.ndarray | None = None,
    ) -> None:
        """``vectors``: the candidates already encoded by ``encoder``, to skip encoding them."""
        _check_members(texts, labels)
        if oversample < 1:
            raise ValueError(f"oversample must be at least 1, got {oversample}")
        self._encoder = encoder
        self._oversample = oversample
        self._label_of = {row: int(label) for row, label in enumerate(labels)}
        if vectors is None:
            vectors = encoder.encode(list(texts))
        self._index = MemberIndex.build(vectors, np.arange(len(texts), dtype=np.int64))

    def rank(self, queries: Sequence[str], k: int) -> list[list[int]]:
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        queries = list(queries)
        if not queries:
            return []
        total = len(self._index)
        vectors = self._encoder.encode(queries)
        ranked: list[list[int] | None] = [None] * len(queries)
        pending = np.arange(len(queries))
        depth = min(total, k * self._oversample)
        while len(pending):
            scores, ids = self._index.search(vectors[pending], max(depth, 1))
            still: list[int] = []
            for row, query_scores, query_ids in zip(pending, scores, ids, strict=True):
                hits = [(int(i), float(s)) for i, s in zip(query_ids, query_scores, strict=True)]
                groups = rank_groups(hits, self._label_of, k=k)
                if len(groups) < k and depth < total:
                    still.append(int(row))
                else:
                    ranked[row] = [hit.group_id for hit in groups]
            pending = np.asarray(still, dtype=np.int64)
            depth = min(total, depth * 4)
        return [labels or [] for labels in ranked]
