"""Data augmentations of Neculoiu et al. (2016), each a source of invariance the model must learn.

The paper grows its training set in stages — typos, synonyms, extra words, feedback — and tests
each stage with a matching test set (see ``evaluation.build_test_suite``). Every function here
takes an explicit ``random.Random`` so that a training set or a test suite is reproducible from
its seed alone, independent of global state or of the order other code draws random numbers.

By kind: ``typos``, ``synonyms`` (the manual list and those induced from a taxonomy's groups),
``extra_words`` (job-ad words around a title).
Callers import from the module that defines what they need.
"""
