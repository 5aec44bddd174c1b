"""`make run`'s process runner (scripts/run_procfile.py) with a stand-in Procfile: Ctrl-C stops
every process and exits 0 with no error; the URL banner comes after every process said it is
ready; a process that dies by itself still fails the run."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
from pathlib import Path

RUNNER = Path(__file__).resolve().parent.parent / "scripts" / "run_procfile.py"
# On a loaded machine a stand-in may take long to stop; the tests check how the runner stops
# what stops, not its kill deadline.
STOP_SECONDS = "600"

# A server that says it is ready and stops cleanly on SIGTERM, as runserver and Celery do.
SERVER = """
import signal, sys, time
name = sys.argv[1]
def stop(*_):
    print(name, "stopping", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print(name, "is ready", flush=True)
time.sleep(3600)
"""


def procfile(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "Procfile"
    path.write_text("\n".join(lines) + "\n")
    return path


def start(path: Path, *extra: str) -> subprocess.Popen:
    # A session of its own, as a terminal's job is: the signal below reaches the runner only.
    return subprocess.Popen(
        [sys.executable, str(RUNNER), "-f", str(path), "--stop-seconds", STOP_SECONDS, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def read_until(runner: subprocess.Popen, text: str) -> list[str]:
    seen = []
    for line in runner.stdout:
        seen.append(line.rstrip("\n"))
        if text in line:
            return seen
    raise AssertionError(f"the runner ended before printing {text!r}: {seen}")


def server(tmp_path: Path, name: str) -> str:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    return f"{name}: {sys.executable} {script} {name}"


def test_ctrl_c_stops_every_process_and_exits_0_without_an_error(tmp_path):
    path = procfile(
        tmp_path, [server(tmp_path, "web"), server(tmp_path, "worker"), "sleeper: sleep 3600"]
    )
    runner = start(
        path, "--ready", "web=web is ready", "--ready", "worker=worker is ready",
        "--banner", "Siamweb is running at http://127.0.0.1:8000/",
    )  # fmt: skip
    before = read_until(runner, "Siamweb is running at")
    # The banner comes after both processes said they are ready: it is not scrolled away.
    assert any("web is ready" in line for line in before)
    assert any("worker is ready" in line for line in before)

    runner.send_signal(signal.SIGINT)
    rest, _ = runner.communicate()

    assert runner.returncode == 0, rest
    assert "web stopping" in rest and "worker stopping" in rest
    assert rest.rstrip().endswith("system  | stopped")
    assert "Error" not in rest and "error" not in rest


def test_sigterm_stops_it_the_same_way(tmp_path):
    runner = start(
        procfile(tmp_path, [server(tmp_path, "web")]), "--ready", "web=ready", "--banner", "up"
    )
    read_until(runner, "up")
    runner.send_signal(signal.SIGTERM)
    rest, _ = runner.communicate()
    assert runner.returncode == 0, rest
    assert "web stopping" in rest


def test_a_process_that_dies_by_itself_stops_the_others_and_fails_the_run(tmp_path):
    path = procfile(
        tmp_path, [server(tmp_path, "web"), f"broken: {sys.executable} -c 'raise SystemExit(3)'"]
    )
    runner = start(path)
    out, _ = runner.communicate()
    assert runner.returncode == 3, out
    assert "broken exited with status 3" in out
    assert "web stopping" in out


def test_a_malformed_procfile_is_refused_naming_the_line(tmp_path):
    runner = start(procfile(tmp_path, ["web: true", "no command here"]))
    out, _ = runner.communicate()
    assert runner.returncode == 1
    assert "Procfile:2: expected 'name: command'" in out


def test_ctrl_c_typed_at_a_terminal_under_make_ends_make_with_status_0(tmp_path):
    """As `make run` in a terminal: Ctrl-C goes to the terminal's foreground group, which is
    the runner's alone, so make sees its recipe succeed instead of dying of the signal."""
    path = procfile(tmp_path, [server(tmp_path, "web")])
    makefile = tmp_path / "Makefile"
    makefile.write_text(
        f"run:\n\t@{sys.executable} {RUNNER} -f {path} --stop-seconds {STOP_SECONDS}"
        " --ready web=ready --banner 'all up'\n"
    )
    pid, terminal = pty.fork()
    if pid == 0:  # the child: make, in the new terminal
        os.execvp("make", ["make", "--no-print-directory", "-f", str(makefile), "run"])
    seen = b""
    while b"all up" not in seen:
        seen += os.read(terminal, 4096)
    os.write(terminal, b"\x03")  # Ctrl-C typed at the terminal
    while True:
        try:
            chunk = os.read(terminal, 4096)
        except OSError:  # the terminal closed: make has ended
            break
        if not chunk:
            break
        seen += chunk
    _, status = os.waitpid(pid, 0)
    out = seen.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, out
    assert "web stopping" in out and "system | stopped" in out
    assert "Error" not in out and "Interrupt" not in out


def test_a_process_that_ignores_the_stop_is_killed_after_the_stop_seconds(tmp_path):
    stubborn = tmp_path / "stubborn.py"
    stubborn.write_text(
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\ntime.sleep(3600)\n"
    )
    path = procfile(tmp_path, [f"stubborn: {sys.executable} {stubborn}"])
    runner = subprocess.Popen(
        [sys.executable, str(RUNNER), "-f", str(path), "--stop-seconds", "0.5",
         "--ready", "stubborn=ready", "--banner", "up"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    read_until(runner, "up")
    runner.send_signal(signal.SIGINT)
    rest, _ = runner.communicate()
    assert "still running after 0.5 s: killed" in rest
    assert runner.returncode == 128 + signal.SIGKILL, rest


def test_a_stop_deadline_that_is_not_above_0_is_refused(tmp_path):
    runner = subprocess.run(
        [sys.executable, str(RUNNER), "-f", str(procfile(tmp_path, ["web: true"])),
         "--stop-seconds", "0"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert runner.returncode == 2
    assert "--stop-seconds must be above 0" in runner.stderr
