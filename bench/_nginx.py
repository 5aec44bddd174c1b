"""nginx in front of a gunicorn, with the site config docs/deploying.md gives
(``deploy/nginx-siamweb.conf``), for the proxy tests and the load benchmark.

The config is used as written, but for what only a deployment knows: the upstream's port, the
ports nginx listens on (loopback), a self-signed certificate for ``localhost``, where the static
files were collected, and the proxy's secret (SIAMWEB_PROXY_SECRET). Each of those lines must be
in the file exactly once, so an edit that the tests no longer exercise fails loudly instead of
silently testing something else.
nginx runs in the foreground with its own prefix folder: its pid, logs and temporary files stay
there, and Debian's own nginx service is neither needed nor touched.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SITE_CONFIG = ROOT / "deploy" / "nginx-siamweb.conf"
START_SECONDS = 30


class NginxError(RuntimeError):
    """nginx is missing, refused the config, or did not start."""


@dataclass
class Proxy:
    process: subprocess.Popen
    http_port: int
    https_port: int
    folder: Path

    @property
    def access_log(self) -> Path:
        return self.folder / "access.log"

    @property
    def error_log(self) -> Path:
        return self.folder / "error.log"


def nginx_binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else "")
    if not found:
        raise NginxError("nginx is not installed: `make services` installs Debian's package")
    return found


def site_config(
    *,
    upstream_port: int,
    http_port: int,
    https_port: int,
    static_root: Path,
    cert: Path,
    key: Path,
    proxy_secret: str,
) -> str:
    """The deployed site config with this machine's ports, certificate, static folder and
    proxy secret."""
    text = SITE_CONFIG.read_text()
    for old, new in (
        ("server 127.0.0.1:8000;", f"server 127.0.0.1:{upstream_port};"),
        ("listen 80;", f"listen 127.0.0.1:{http_port};"),
        ("listen 443 ssl http2;", f"listen 127.0.0.1:{https_port} ssl http2;"),
        ("/etc/ssl/siamweb/fullchain.pem", str(cert)),
        ("/etc/ssl/siamweb/privkey.pem", str(key)),
        ("/srv/siamweb/var/staticfiles/", f"{static_root}/"),
        ("replace-with-SIAMWEB_PROXY_SECRET", proxy_secret),
    ):
        if text.count(old) != 1:
            raise NginxError(f"{SITE_CONFIG.name} should hold {old!r} exactly once")
        text = text.replace(old, new)
    return text


def self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "localhost.pem", folder / "localhost.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _main_config(folder: Path) -> str:
    # As root nginx's workers would run as nobody, who cannot read a private temporary folder.
    user = "user root;\n" if os.geteuid() == 0 else ""
    temp = "\n".join(
        f"    {kind}_temp_path {folder / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return (
        f"{user}daemon off;\nworker_processes 1;\npid {folder / 'nginx.pid'};\n"
        f"error_log {folder / 'error.log'} info;\n"
        "events { worker_connections 1024; }\n"
        "http {\n"
        "    include /etc/nginx/mime.types;\n"
        "    default_type application/octet-stream;\n"
        f"    access_log {folder / 'access.log'};\n"
        f"{temp}\n"
        f"    include {folder / 'site.conf'};\n"
        "}\n"
    )


def start_nginx(
    folder: Path, *, upstream_port: int, static_root: Path, proxy_secret: str | None = None
) -> Proxy:
    """nginx with the deployed site config in front of gunicorn on ``upstream_port``;
    ``proxy_secret``: the gunicorn's SIAMWEB_PROXY_SECRET (a random one if it has none, for a
    development server that believes no forwarded header anyway)."""
    binary = nginx_binary()
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = self_signed_certificate(folder)
    http_port, https_port = _free_port(), _free_port()
    (folder / "site.conf").write_text(
        site_config(
            upstream_port=upstream_port, http_port=http_port, https_port=https_port,
            static_root=static_root, cert=cert, key=key,
            proxy_secret=proxy_secret or secrets.token_urlsafe(32),
        )
    )  # fmt: skip
    main = folder / "nginx.conf"
    main.write_text(_main_config(folder))
    checked = subprocess.run(
        [binary, "-t", "-p", str(folder), "-c", str(main)], capture_output=True, text=True
    )
    if checked.returncode != 0:
        raise NginxError(f"nginx refused the config:\n{checked.stderr}")
    process = subprocess.Popen(
        [binary, "-p", str(folder), "-c", str(main)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    proxy = Proxy(process, http_port, https_port, folder)
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise NginxError(f"nginx exited at start:\n{proxy.error_log.read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", https_port), timeout=1).close()
            return proxy
        except OSError:
            time.sleep(0.1)
    stop_nginx(proxy)
    raise NginxError(f"nginx did not listen within {START_SECONDS} s")


def stop_nginx(proxy: Proxy) -> None:
    if proxy.process.poll() is not None:
        return
    proxy.process.terminate()  # nginx's fast shutdown
    try:
        proxy.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proxy.process.kill()
        proxy.process.wait()
