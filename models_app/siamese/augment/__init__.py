"""Data augmentations of Neculoiu et al. (2016), each a source of invariance the model must learn.

The paper grows its training set in stages — typos, synonyms, extra words, feedback — and tests
each stage with a matching test set (see ``evaluation.build_test_suite``). Every function here
takes an explicit ``random.Random`` so that a training set or a test suite is reproducible from
its seed alone, independent of global state or of the order other code draws random numbers.

By kind: ``typos``, ``synonyms`` (the manual list and those induced from a taxonomy's groups),
``extra_words`` (job-ad words around a title). Callers import from here.
"""

from __future__ import annotations

from models_app.siamese.augment.extra_words import (
    EXTRA_WORD_PATTERNS,
    EXTRA_WORD_POOLS,
    ExtraWords,
    noise_tokens,
)
from models_app.siamese.augment.synonyms import (
    GROUPS_CACHED,
    MANUAL_SYNONYMS_PATH,
    GroupSynonyms,
    K,
    SynonymPair,
    SynonymReplacer,
    apply_synonym,
    induce_synonyms,
    induce_synonyms_by_group,
    load_synonym_groups,
    load_synonyms,
)
from models_app.siamese.augment.typos import (
    add_typos,
    add_typos_exact,
)

__all__ = [
    "EXTRA_WORD_PATTERNS",
    "EXTRA_WORD_POOLS",
    "GROUPS_CACHED",
    "MANUAL_SYNONYMS_PATH",
    "ExtraWords",
    "GroupSynonyms",
    "K",
    "SynonymPair",
    "SynonymReplacer",
    "add_typos",
    "add_typos_exact",
    "apply_synonym",
    "induce_synonyms",
    "induce_synonyms_by_group",
    "load_synonym_groups",
    "load_synonyms",
    "noise_tokens",
]
