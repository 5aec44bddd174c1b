"""REST API, version 1, for models: versions (and which one is live) and training runs.

Curators read; only admins make a version live, start a run (build, reindex, fine-tune), roll
back to an earlier version, force a rejected candidate live or retry a failed run. See
annotations/api/ for the conventions every view follows. A refusal about the state of things
(a run already active, a run or version in the wrong state) is a 409 naming what is wrong.

By resource: ``base`` (choice fields, the querysets the views read, the 409s), ``versions``
(versions, making one live, rollback), ``runs`` (training runs), ``reports`` (a run's gate and
flip reports). Callers import from the module that defines what they need.
"""
