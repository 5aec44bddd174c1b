from __future__ import annotations

import os

# Before torch or FAISS load their OpenMP runtime: its threads otherwise spin for a while after
# each parallel region, and a web request that encodes (torch) and then searches (BLAS) makes
# the two fight for the same cores (docs/decisions/performance-choices.md). An OMP_WAIT_POLICY
# in the environment still wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from siamweb.celery import app as celery_app

__all__ = ["celery_app"]
