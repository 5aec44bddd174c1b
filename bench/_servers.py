"""The product's own processes for the load benchmarks: gunicorn, a Celery worker and beat, as
`make run` and docs/deploying.md start them, plus what /proc says about them (CPU, memory).

The processes inherit the benchmark's environment (DATABASE_URL, CELERY_BROKER_URL,
SIAMWEB_VAR_DIR), so they share its scratch database and broker.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from siamweb.task_names import QUEUES

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = ROOT / ".venv" / "bin"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_gunicorn(
    *,
    port: int,
    workers: int,
    threads: int,
    torch_threads: int,
    log: Path | None = None,
    config: str | None = None,
    root: Path = ROOT,
    env: dict[str, str] | None = None,
    extra_args: tuple[str, ...] = (),
) -> subprocess.Popen:
    """gunicorn on loopback; ``config``: a ``-c`` argument (``deploy/gunicorn.conf.py``
    preloads the live engines in the master, as deployed); ``root``: the checkout it serves
    (another commit's, for a before-and-after), with this one's virtual environment; ``env``:
    its whole environment (this process's by default)."""
    env = dict(os.environ if env is None else env)
    # Each worker is one process on a 2-core machine: intra-op threads beyond this would only
    # fight the other workers for the same cores.
    env["OMP_NUM_THREADS"] = str(torch_threads)
    env["MKL_NUM_THREADS"] = str(torch_threads)
    command = [
        str(VENV_BIN / "gunicorn"),
        "siamweb.wsgi",
        f"--bind=127.0.0.1:{port}",
        f"--workers={workers}",
        f"--threads={threads}",
        "--worker-class=gthread",
        "--keep-alive=30",
        "--timeout=120",
        "--log-level=warning",
        *([f"--config={config}"] if config else []),
        *extra_args,
    ]
    output = log.open("ab") if log else None
    process = subprocess.Popen(
        command, cwd=root, env=env, start_new_session=True, stdout=output, stderr=output
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"gunicorn exited with {process.returncode}")
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                connection.request("GET", "/healthz", headers={"Host": "localhost"})
                if connection.getresponse().status == 200:
                    return process
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError("gunicorn did not answer /healthz within 60 s")
    except BaseException:  # Ctrl-C or SIGTERM while it starts: leave no server behind
        stop_gunicorn(process)
        raise


def stop_gunicorn(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)  # gunicorn's graceful shutdown: workers finish, exit
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    print(f"gunicorn stopped (exit {process.returncode})")


class NormalizeClient:
    """POSTs texts to a taxonomy's normalize API with a token; ``keep_alive=False`` opens a new
    connection a request, so gunicorn's master spreads them over its workers."""

    def __init__(self, port: int, token: str, path: str, *, keep_alive: bool = True) -> None:
        self.port, self.path, self.keep_alive = port, path, keep_alive
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.headers = {
            "Authorization": f"Token {token}",
            "Content-Type": "application/json",
            "Host": "localhost",
            **({} if keep_alive else {"Connection": "close"}),
        }

    def normalize(self, texts: list[str]) -> list[dict]:
        if not self.keep_alive:
            self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        body = json.dumps({"texts": texts})
        try:
            self.connection.request("POST", self.path, body=body, headers=self.headers)
            response = self.connection.getresponse()
            payload = response.read()
        finally:
            if not self.keep_alive:
                self.connection.close()
        if response.status != 200:
            raise RuntimeError(f"normalize answered {response.status}: {payload[:200]!r}")
        return json.loads(payload)["results"]


def start_celery(role: str, *, log: Path, extra: tuple[str, ...] = ()) -> subprocess.Popen:
    """``celery worker`` (prefork, one child, every queue) or ``celery beat``."""
    command = [str(VENV_BIN / "celery"), "-A", "siamweb", role, "--loglevel=INFO"]
    if role == "worker":
        command += ["--pool=prefork", "--concurrency=1", f"--queues={','.join(QUEUES)}"]
    with log.open("ab") as output:
        return subprocess.Popen(
            [*command, *extra],
            cwd=ROOT,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def kill_tree(process: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Signal a process and every process of its session (a prefork worker's children)."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def stop_celery(process: subprocess.Popen) -> None:
    kill_tree(process, signal.SIGTERM)


_TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def process_cpu_ms(pid: int) -> float | None:
    """User + system CPU time of a process, all its threads, from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the name may hold spaces; fields after it don't
    return (int(fields[11]) + int(fields[12])) * _TICK_MS


def children(parent: int) -> list[int]:
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == parent:
                pids.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return pids


def memory_mb(pid: int) -> dict[str, float]:
    """Resident (RSS), proportional (PSS: each shared page divided among the processes sharing
    it) and private (USS: what ending the process would free) memory of a process, in MB."""
    fields = {"Rss": 0, "Pss": 0, "Private_Clean": 0, "Private_Dirty": 0}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            name, _, rest = line.partition(":")
            if name in fields:
                fields[name] = int(rest.split()[0])
    except OSError:
        pass
    return {
        "rss_mb": round(fields["Rss"] / 1024, 1),
        "pss_mb": round(fields["Pss"] / 1024, 1),
        "uss_mb": round((fields["Private_Clean"] + fields["Private_Dirty"]) / 1024, 1),
    }


def rss_mb(pid: int) -> float:
    """Resident memory of one process in MB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0
