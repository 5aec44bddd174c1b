"""Settings for the test suite: the real services, not the embedded defaults.

PostgreSQL and Redis on this machine unless DATABASE_URL / CELERY_BROKER_URL say otherwise
(``make services`` starts them). Artifacts go to a scratch folder.
"""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("DATABASE_URL", "postgres://postgres:postgres@127.0.0.1:5432/siamweb")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/15")
os.environ.setdefault("SIAMWEB_VAR_DIR", tempfile.mkdtemp(prefix="siamweb-test-"))

from siamweb.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests
# Double review is switched on per test, where it is the behaviour under test.
SIAMWEB_DOUBLE_REVIEW_PERCENT = 0
