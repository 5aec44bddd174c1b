"""gunicorn as deployed (production settings, one worker of one thread: the easiest to starve)
behind nginx with the site config docs/deploying.md gives, against the PostgreSQL test database.

Started once for the module; the tests send requests to nginx as a client on the Internet would
and read gunicorn's access log to tell what reached it.
"""

from __future__ import annotations

import http.client
import os
import re
import secrets
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from bench._nginx import Proxy, start_nginx, stop_nginx
from bench._servers import free_port, start_gunicorn, stop_gunicorn

ROOT = Path(__file__).resolve().parents[2]
HOST = "localhost"


@dataclass
class Deployment:
    proxy: Proxy
    gunicorn_port: int
    gunicorn_access_log: Path

    def https(self, timeout: float = 120) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            "127.0.0.1", self.proxy.https_port, timeout=timeout, context=client_tls()
        )

    def http(self, port: int | None = None) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", port or self.proxy.http_port, timeout=30)

    def access_log_size(self) -> int:
        return self.gunicorn_access_log.stat().st_size

    def reached_gunicorn(self, since: int, method: str, path: str) -> bool:
        """Whether gunicorn logged ``method path`` after its access log was ``since`` bytes.

        gunicorn logs a request once it has answered it: a marker request sent afterwards and
        waited for makes sure every earlier request that reached it is in the log."""
        marker = f"/healthz?marker={secrets.token_hex(8)}"
        connection = self.https()
        connection.request("GET", marker, headers={"Host": HOST})
        connection.getresponse().read()
        logged = ""
        for _ in range(100):
            with self.gunicorn_access_log.open("rb") as log:
                log.seek(since)
                logged = log.read().decode()
            if marker in logged:
                break
            time.sleep(0.1)
        assert marker in logged, "gunicorn never logged the marker request"
        return re.search(rf'"{method} {re.escape(path)}[ ?]', logged) is not None


def client_tls() -> ssl.SSLContext:
    # The test's certificate is self-signed for localhost: encryption without verification.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def production_env(var_dir: Path) -> dict[str, str]:
    db = connection.settings_dict
    kept = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SIAMWEB_", "DATABASE_", "DEBUG", "SECRET_KEY", "SECURE_"))
        and key != "DJANGO_ALLOW_ASYNC_UNSAFE"
    }
    return kept | {
        "DJANGO_SETTINGS_MODULE": "siamweb.settings",
        "SIAMWEB_ENV": "production",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": HOST,
        "SIAMWEB_PROXY_COUNT": "1",
        "SIAMWEB_PROXY_SECRET": secrets.token_urlsafe(32),
        "SIAMWEB_VAR_DIR": str(var_dir),
        "SIAMWEB_ARTIFACTS_DIR": str(settings.SIAMWEB_ARTIFACTS_DIR),
        "DATABASE_URL": (
            f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
        ),
    }


@pytest.fixture(scope="module")
def deployment(django_db_setup, django_db_blocker, tmp_path_factory):
    folder = tmp_path_factory.mktemp("deployment")
    with django_db_blocker.unblock():
        if connection.vendor != "postgresql":
            pytest.fail("the proxy tests need PostgreSQL: set DATABASE_URL (make services)")
        env = production_env(folder / "var")
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity=0"],
        cwd=ROOT, env=env, check=True,
    )  # fmt: skip
    port = free_port()
    access_log = folder / "gunicorn-access.log"
    gunicorn = start_gunicorn(
        port=port, workers=1, threads=1, torch_threads=1, env=env,
        config="deploy/gunicorn.conf.py", log=folder / "gunicorn.log",
        extra_args=(f"--access-logfile={access_log}",),
    )  # fmt: skip
    try:
        proxy = start_nginx(
            folder / "nginx",
            upstream_port=port,
            static_root=folder / "var" / "staticfiles",
            proxy_secret=env["SIAMWEB_PROXY_SECRET"],
        )
        try:
            yield Deployment(proxy, port, access_log)
        finally:
            stop_nginx(proxy)
    finally:
        stop_gunicorn(gunicorn)
