"""The HTTP edge's settings come from the environment: the cache the throttles count in, the proxies
in front (read alike by the login lockout and DRF), the lockout's limit and wait, the throttles'
rates and the tokens' age; a malformed value stops start-up naming its variable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHOW = """
import json, django
django.setup()
from django.conf import settings as s
rf = s.REST_FRAMEWORK
print(json.dumps({
    "cache": [s.CACHES["default"]["BACKEND"], s.CACHES["default"].get("LOCATION")],
    "num_proxies": rf["NUM_PROXIES"],
    "rates": rf["DEFAULT_THROTTLE_RATES"],
    "axes": [s.AXES_FAILURE_LIMIT, s.AXES_COOLOFF_TIME.total_seconds(), s.AXES_CLIENT_IP_CALLABLE],
    "token_days": s.SIAMWEB_API_TOKEN_MAX_AGE_DAYS,
}))
"""


def start(tmp_path, **env: str) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SIAMWEB_", "DATABASE_", "CELERY_", "DEBUG", "SECRET_KEY"))
    }
    clean.update({"DJANGO_SETTINGS_MODULE": "siamweb.settings", "SIAMWEB_VAR_DIR": str(tmp_path)})
    clean.update(env)
    return subprocess.run(
        [sys.executable, "-c", SHOW], cwd=ROOT, env=clean, capture_output=True, text=True
    )


def test_the_defaults_count_in_each_process_and_trust_no_forwarded_address(tmp_path):
    result = start(tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "cache": ["django.core.cache.backends.locmem.LocMemCache", None],
        "num_proxies": 0,
        "rates": {"bad_token": "20/min", "token": "30/hour"},
        "axes": [5, 900.0, "siamweb.authentication.client_address"],
        "token_days": 90,
    }


def test_each_variable_reaches_its_setting(tmp_path):
    result = start(
        tmp_path,
        SIAMWEB_CACHE_URL="redis://cache.example:6379/1",
        SIAMWEB_PROXY_COUNT="1",
        SIAMWEB_LOGIN_FAILURE_LIMIT="3",
        SIAMWEB_LOGIN_LOCKOUT_MINUTES="2",
        SIAMWEB_BAD_TOKEN_RATE="5/hour",
        SIAMWEB_TOKEN_API_RATE="100/day",
        SIAMWEB_API_TOKEN_MAX_AGE_DAYS="0",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "cache": ["django.core.cache.backends.redis.RedisCache", "redis://cache.example:6379/1"],
        "num_proxies": 1,
        "rates": {"bad_token": "5/hour", "token": "100/day"},
        "axes": [3, 120.0, "siamweb.authentication.client_address"],
        "token_days": 0,
    }


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SIAMWEB_CACHE_URL": "memcached://cache:11211"}, "SIAMWEB_CACHE_URL must start with"),
        ({"SIAMWEB_BAD_TOKEN_RATE": "lots"}, "SIAMWEB_BAD_TOKEN_RATE must be a count per"),
        ({"SIAMWEB_TOKEN_API_RATE": "5/fortnight"}, "SIAMWEB_TOKEN_API_RATE must be a count per"),
        ({"SIAMWEB_PROXY_COUNT": "-1"}, "SIAMWEB_PROXY_COUNT must be at least 0"),
        ({"SIAMWEB_LOGIN_FAILURE_LIMIT": "0"}, "SIAMWEB_LOGIN_FAILURE_LIMIT must be at least 1"),
    ],
)
def test_a_malformed_value_stops_start_up_naming_it(tmp_path, env, message):
    result = start(tmp_path, **env)
    assert result.returncode != 0
    assert message in result.stderr
