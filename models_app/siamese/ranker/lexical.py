"""Texts' words and trigrams as integer ids, kept per text in a ``LexicalCache``: a member's text
is read again by every query that hits it. The words or trigrams pairs of texts share are
counted for all pairs at once (``Lexicon.shared_words``, ``Lexicon.shared_grams``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, compress, count, repeat
from operator import is_

import numpy as np

from models_app.siamese.text import comparison_key

_WORD = re.compile(r"\w+")


class _RaggedRows:
    """Rows of integer ids one after another (``ids[starts[r]:starts[r + 1]]`` is row ``r``),
    appended in place into buffers that double when full. A snapshot is views of the buffers as
    they are: appending writes past what it sees, and a doubling copies into new buffers, so a
    snapshot stays valid while other threads append."""

    def __init__(self) -> None:
        self._starts = np.zeros(1024, np.int64)
        self._ids = np.zeros(16384, np.int32)
        self.rows = 0

    def extend(self, sizes: list[int], ids: list[int]) -> None:
        """Rows of these ``sizes`` holding ``ids`` one after another."""
        rows, total = self.rows, int(self._starts[self.rows])
        ends = list(accumulate(sizes, initial=total))[1:]
        if rows + len(ends) + 1 > len(self._starts):
            self._starts = _grown(self._starts, rows + len(ends) + 1, rows + 1)
        if total + len(ids) > len(self._ids):
            self._ids = _grown(self._ids, total + len(ids), total)
        self._starts[rows + 1 : rows + 1 + len(ends)] = ends
        self._ids[total : total + len(ids)] = ids
        self.rows = rows + len(ends)

    def snapshot(self) -> tuple[np.ndarray, np.ndarray]:
        end = int(self._starts[self.rows])
        return self._starts[: self.rows + 1], self._ids[:end]


def _grown(buffer: np.ndarray, needed: int, used: int) -> np.ndarray:
    grown = np.zeros(max(needed, 2 * len(buffer)), buffer.dtype)
    grown[:used] = buffer[:used]
    return grown


@dataclass(frozen=True)
class Lexicon:
    """Texts' words and trigrams as read from a ``LexicalCache`` at one moment: ``rows`` (n,)
    each text's row; a row's word ids are ``word_ids[word_starts[r]:word_starts[r + 1]]``
    (distinct, like its trigram ids), ids below ``word_vocabulary`` (``gram_vocabulary``).
    Texts with the same comparison key have the same row."""

    rows: np.ndarray
    word_starts: np.ndarray
    word_ids: np.ndarray
    word_vocabulary: int
    gram_starts: np.ndarray
    gram_ids: np.ndarray
    gram_vocabulary: int

    def word_counts(self, rows: np.ndarray) -> np.ndarray:
        return self.word_starts[rows + 1] - self.word_starts[rows]

    def gram_counts(self, rows: np.ndarray) -> np.ndarray:
        return self.gram_starts[rows + 1] - self.gram_starts[rows]

    def shared_words(self, a: np.ndarray, a_of_pair: np.ndarray, b: np.ndarray) -> np.ndarray:
        """How many words rows ``a[a_of_pair[p]]`` and ``b[p]`` share, for each pair ``p``."""
        return _shared(self.word_starts, self.word_ids, self.word_vocabulary, a, a_of_pair, b)

    def shared_grams(self, a: np.ndarray, a_of_pair: np.ndarray, b: np.ndarray) -> np.ndarray:
        """How many trigrams rows ``a[a_of_pair[p]]`` and ``b[p]`` share, for each pair ``p``."""
        return _shared(self.gram_starts, self.gram_ids, self.gram_vocabulary, a, a_of_pair, b)


# Rows of the ``a`` side counted against at once: each block holds a table of a rows by the ids
# they hold, some 512 x 10,000 booleans at most.
_SHARED_BLOCK = 512


def _shared(starts, ids, vocabulary: int, a_rows, a_of_pair, b) -> np.ndarray:
    """``|ids of a_rows[a_of_pair[p]] ∩ ids of b[p]|`` for each pair ``p`` (a row's ids are
    distinct): a table of which ids each ``a`` row holds, looked up for every id of the ``b``
    rows."""
    if len(a_rows) <= _SHARED_BLOCK:
        return _shared_block(starts, ids, vocabulary, a_rows, a_of_pair, b)
    found = np.zeros(len(b), np.int64)
    block = a_of_pair // _SHARED_BLOCK
    for number in np.unique(block).tolist():
        pairs = np.flatnonzero(block == number)
        first = number * _SHARED_BLOCK
        found[pairs] = _shared_block(
            starts, ids, vocabulary, a_rows[first : first + _SHARED_BLOCK],
            a_of_pair[pairs] - first, b[pairs],
        )  # fmt: skip
    return found


def _shared_block(starts, ids, vocabulary, a_rows, a_of_pair, b) -> np.ndarray:
    a_sizes = starts[a_rows + 1] - starts[a_rows]
    a_ids = ids[_ranges(starts[a_rows], a_sizes)]
    used = np.unique(a_ids)
    # Each id's column in the table; ids no ``a`` row holds share the last, always False.
    width = len(used) + 1
    column = np.full(vocabulary, len(used), np.int64)
    column[used] = np.arange(len(used))
    held = np.zeros(len(a_rows) * width, bool)
    held[(np.arange(len(a_rows)) * width).repeat(a_sizes) + column[a_ids]] = True
    b_sizes = starts[b + 1] - starts[b]
    cells = (a_of_pair * width).repeat(b_sizes)
    cells += column[ids[_ranges(starts[b], b_sizes)]]
    running = np.concatenate([[0], held.take(cells).cumsum()])
    ends = b_sizes.cumsum()
    return running[ends] - running[ends - b_sizes]


def _ranges(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The positions ``starts[i] .. starts[i] + sizes[i] - 1`` of every ``i``, one after
    another."""
    ends = sizes.cumsum()
    return (starts - ends + sizes).repeat(sizes) + np.arange(ends[-1] if len(ends) else 0)


class LexicalCache:
    """Each text's words and trigrams as integer ids, worked out once: a member's text is read
    again by every query that hits it. A text's trigrams are its comparison key's three-letter
    slices, its words the key's ``\\w+`` runs, each counted once; texts with the same key share
    a row. Threads of a process share it (one lock). Bounded: past ``size`` texts it starts
    afresh."""

    def __init__(self, size: int = 200_000) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._start_afresh()

    def _start_afresh(self) -> None:
        self._row_of_text: dict[str, int] = {}
        self._row_of_key: dict[str, int] = {}
        self._word_id: dict[str, int] = {}
        self._gram_id: dict[str, int] = {}
        self._words = _RaggedRows()
        self._grams = _RaggedRows()

    def lookup(self, texts: Sequence[str]) -> Lexicon:
        """The rows of ``texts``, texts not seen before worked out now."""
        with self._lock:
            if len(self._row_of_text) >= self.size:
                self._start_afresh()
            rows = list(map(self._row_of_text.get, texts))
            if None in rows:
                self._add(list(dict.fromkeys(compress(texts, map(is_, rows, repeat(None))))))
                rows = list(map(self._row_of_text.__getitem__, texts))
            return Lexicon(
                np.array(rows, np.int64).reshape(len(rows)),
                *self._words.snapshot(), len(self._word_id),
                *self._grams.snapshot(), len(self._gram_id),
            )  # fmt: skip

    def _add(self, texts: list[str]) -> None:
        keys = list(map(comparison_key, texts))
        known = list(map(self._row_of_key.get, keys))
        new_keys = list(dict.fromkeys(compress(keys, map(is_, known, repeat(None)))))
        if new_keys:
            self._row_of_key.update(zip(new_keys, count(self._words.rows), strict=False))
            words, grams = self._rows_of(new_keys)
            self._words.extend(*words)
            self._grams.extend(*grams)
        self._row_of_text.update(zip(texts, map(self._row_of_key.__getitem__, keys), strict=True))

    def _rows_of(self, keys: list[str]):
        """Each key's distinct word ids and trigram ids, as (sizes, ids) each. Key by key: once
        a text, which costs what building its sets of words and trigrams did (working them
        out as arrays saved nothing: the dictionary lookups are the cost either way)."""
        word_ids, gram_ids, word_sizes, gram_sizes = [], [], [], []
        for key in keys:
            words = _ids_of(set(_WORD.findall(key)), self._word_id)
            grams = _ids_of({key[i : i + 3] for i in range(len(key) - 2)}, self._gram_id)
            word_ids += words
            gram_ids += grams
            word_sizes.append(len(words))
            gram_sizes.append(len(grams))
        return (word_sizes, word_ids), (gram_sizes, gram_ids)


def _ids_of(items, vocabulary: dict) -> list[int]:
    """The ids of ``items``, new ones given the next ids."""
    ids = list(map(vocabulary.get, items))
    if None in ids:
        ids = [vocabulary.setdefault(item, len(vocabulary)) for item in items]
    return ids
