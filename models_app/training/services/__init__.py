"""Writes for models, by capability: the data a model learns from (``training_data``), model
versions fitted, stored and imported (``builds``), indexes and the live pointer (``indexes``),
and training runs (``runs``). Callers import from the module that defines what they need."""
