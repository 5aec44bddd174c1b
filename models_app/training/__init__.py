"""Training: model versions built, fine-tuned on verdicts, gated, made live or rolled back;
the ranker's fits; the Models pages and API that show and start them.

By step: ``services`` (writes: data, builds, indexes, runs), ``run_execution`` (a run's kind to
its capability), ``retraining`` and ``finetune_recipe`` (fine-tunes), ``gate``, ``promotion``,
``ranker_training`` (the ranker's fits); ``selectors`` and ``charts`` read; its HTTP: ``api``,
``views``, ``urls``."""
