"""Run the Procfile's processes for `make run`; Ctrl-C stops them and exits 0.

Honcho stops its processes with SIGTERM to each one's whole process group, so Celery's pool
child is killed under its master ("ForkPoolWorker-1 exited with signal 15"), and it exits with
130 or 143, which make reports as an error. Here each process gets SIGTERM on its own and stops
as it is built to (runserver exits, the Celery master finishes the task in hand and stops its
pool: a warm shutdown); a normal stop exits 0, a process that dies by itself still fails the
run with its status. A second Ctrl-C, or ``--stop-seconds`` without an exit, kills what is left.

In a terminal this script also takes the terminal's foreground, as a shell does for a job, so
that Ctrl-C reaches it alone and not `make` above it (make would die of the signal: status 130).

    run_procfile.py [-f Procfile] [--ready NAME=TEXT ...] [--banner TEXT] [--stop-seconds N]

``--banner`` is printed once every ``--ready`` process has printed its TEXT: the URL, after
Celery's start-up banner rather than above it.
"""

from __future__ import annotations

import argparse
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager, suppress
from pathlib import Path

STOP_SECONDS = 20.0
# How a process that stopped when asked ends: by itself, or by the signal it was sent.
NORMAL_STOPS = {0, -signal.SIGTERM, -signal.SIGINT, 128 + signal.SIGTERM, 128 + signal.SIGINT}


def read_procfile(path: Path) -> list[tuple[str, str]]:
    processes = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, command = line.partition(":")
        if not sep or not name.strip() or not command.strip():
            raise SystemExit(f"{path}:{number}: expected 'name: command', got {line!r}")
        processes.append((name.strip(), command.strip()))
    if not processes:
        raise SystemExit(f"{path}: no process to run")
    return processes


@contextmanager
def terminal_foreground():
    """Make this process group the terminal's foreground one while it runs (if there is a
    terminal), and hand the terminal back afterwards."""
    try:
        tty = os.open("/dev/tty", os.O_RDWR)
    except OSError:
        yield
        return
    previous = None
    ttou = signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # a background group may not take it
    try:
        previous = os.tcgetpgrp(tty)
        os.setpgid(0, 0)
        os.tcsetpgrp(tty, os.getpgrp())
    except OSError:
        previous = None
    finally:
        signal.signal(signal.SIGTTOU, ttou)
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTTOU, signal.SIG_IGN)
            with suppress(OSError):
                os.tcsetpgrp(tty, previous)
        os.close(tty)


class Runner:
    def __init__(
        self, processes, *, ready: dict[str, str], banner: str, stop_seconds: float = STOP_SECONDS
    ) -> None:
        self.processes = processes
        self.width = max(len(name) for name, _ in processes)
        self.ready, self.banner = dict(ready), banner
        self.stop_seconds = stop_seconds
        self.lines: queue.Queue = queue.Queue()
        self.children: dict[str, subprocess.Popen] = {}
        self.stops_asked = 0  # how many times a stop was asked for (a signal handler counts up)
        self.stopping = 0  # how many of those the run loop has acted on

    def say(self, name: str, text: str) -> None:
        self.write(f"{name.ljust(self.width)} | {text}\n")

    def write(self, text: str) -> None:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):
            # Nobody reads the output any more (the terminal or pipe went away): stop the
            # processes rather than die here and leave them running.
            sys.stdout = Path(os.devnull).open("w")  # noqa: SIM115 (for the rest of the run)
            if not self.stops_asked:
                self.request_stop(None, None)

    def start(self) -> None:
        for name, command in self.processes:
            # exec: the signal goes to the program itself, not to a shell in front of it. A
            # session of its own: the terminal's Ctrl-C reaches this script only.
            child = subprocess.Popen(
                ["/bin/sh", "-c", f"exec {command}"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                text=True,
                errors="replace",
            )
            self.children[name] = child
            threading.Thread(target=self._pump, args=(name, child), daemon=True).start()
            self.say("system", f"{name} started (pid {child.pid})")

    def _pump(self, name: str, child: subprocess.Popen) -> None:
        for line in child.stdout:
            self.lines.put((name, line.rstrip("\n")))

    def request_stop(self, signum, _frame) -> None:
        # Only counted here: a handler that wrote to stdout could land inside the run loop's own
        # write and raise ("reentrant call"), leaving the processes running.
        self.stops_asked += 1

    def _act_on_stop_requests(self) -> None:
        while self.stopping < self.stops_asked:
            self.stopping += 1
            if self.stopping == 1:
                self.say("system", "stopping (Ctrl-C again to kill)")
                self._signal_all(signal.SIGTERM, group=False)
            else:
                self._signal_all(signal.SIGKILL, group=True)

    def _signal_all(self, signum: int, *, group: bool) -> None:
        for child in self.children.values():
            if child.poll() is None:
                try:
                    if group:
                        os.killpg(child.pid, signum)
                    else:
                        os.kill(child.pid, signum)
                except ProcessLookupError:
                    pass

    def _print_lines(self) -> None:
        while True:
            try:
                name, line = self.lines.get(timeout=0.1)
            except queue.Empty:
                return
            self.say(name, line)
            wanted = self.ready.get(name)
            if wanted is not None and wanted in line:
                del self.ready[name]
                if not self.ready and self.banner:
                    self.write(f"\n{self.banner}\n\n")

    def run(self) -> int:
        self.start()
        ended_by_itself: tuple[str, int] | None = None
        stop_deadline = None
        while True:
            self._print_lines()
            for name, child in self.children.items():
                if child.poll() is not None and not self.stops_asked:
                    # One process ended unasked: the product is not whole, stop the rest.
                    ended_by_itself = (name, child.returncode)
                    self.say("system", f"{name} exited with status {child.returncode}")
                    self.request_stop(None, None)
            self._act_on_stop_requests()
            if self.stopping and stop_deadline is None:
                stop_deadline = time.monotonic() + self.stop_seconds
            if all(child.poll() is not None for child in self.children.values()):
                break
            if stop_deadline is not None and time.monotonic() > stop_deadline:
                self.say("system", f"still running after {self.stop_seconds:g} s: killed")
                self._signal_all(signal.SIGKILL, group=True)
                stop_deadline = float("inf")
        self._print_lines()
        return self._status(ended_by_itself)

    def _status(self, ended_by_itself: tuple[str, int] | None) -> int:
        """0 when every process stopped as asked; else the status of what went wrong (a
        signal N as 128 + N, the way a shell reports it)."""
        if ended_by_itself is not None:
            code = ended_by_itself[1]
        else:
            wrong = [
                c.returncode for c in self.children.values() if c.returncode not in NORMAL_STOPS
            ]
            code = wrong[0] if wrong else 0
        if code == 0:
            self.say("system", "stopped")
        return code if code >= 0 else 128 - code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-f", "--procfile", default="Procfile", type=Path)
    parser.add_argument("--ready", action="append", default=[], metavar="NAME=TEXT")
    parser.add_argument("--banner", default="")
    parser.add_argument(
        "--stop-seconds", type=float, default=STOP_SECONDS,
        help="how long a process may take to stop when asked before it is killed",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.stop_seconds <= 0:
        parser.error("--stop-seconds must be above 0")
    ready = {}
    for item in args.ready:
        name, sep, text = item.partition("=")
        if not sep or not text:
            parser.error(f"--ready expects NAME=TEXT, got {item!r}")
        ready[name] = text
    runner = Runner(
        read_procfile(args.procfile), ready=ready, banner=args.banner,
        stop_seconds=args.stop_seconds,
    )  # fmt: skip
    with terminal_foreground():
        # SIGHUP: the terminal closed.
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, runner.request_stop)
        return runner.run()


if __name__ == "__main__":
    sys.exit(main())
