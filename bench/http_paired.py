"""One text and 500 texts a request over HTTP, this checkout against an earlier commit, paired.

Both served as deployed (gunicorn ``-c deploy/gunicorn.conf.py``, 2 workers x 2 threads)
from one scratch PostgreSQL database with O*NET and the shipped model live; the earlier commit
from a temporary git worktree with this checkout's virtual environment (its migrations must be
these). One keep-alive client sends each real vacancy title (JobBERT) to both, in alternating
order, so both see the same machine at the same moment: the difference is read pair by pair
(median, with a 95% bootstrap interval), and the answers are compared too.

    .venv/bin/python bench/http_paired.py --before REV [--single 600] [--batches 8]

Prints a table and writes bench/results/http_paired.json; the worktree and the scratch
database are removed at the end.
"""

from __future__ import annotations

import argparse
import atexit
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _pg
from bench._servers import NormalizeClient, free_port, start_gunicorn, stop_gunicorn

_pg.scratch_database(broker="memory://")

from django.db import connections  # noqa: E402
from rest_framework.authtoken.models import Token  # noqa: E402

from annotations.services.accounts import user_ensure  # noqa: E402
from bench.http_vs_minilm import BATCH, PATH, singles_and_batches  # noqa: E402


def git(*arguments: str) -> str:
    """What ``git`` prints in this checkout, stripped."""
    done = subprocess.run(
        ["git", *arguments], cwd=_pg.ROOT, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def worktree_of(revision: str) -> tuple[Path, str]:
    """A detached worktree of ``revision`` with this checkout's .venv, removed at exit."""
    commit = git("rev-parse", "--short", revision)
    scratch = Path(tempfile.mkdtemp(prefix="siamweb-before-"))
    folder = scratch / "checkout"
    git("worktree", "add", "--detach", "--quiet", str(folder), commit)
    # At exit, last registered first: the worktree, then its folder.
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    atexit.register(
        subprocess.run, ["git", "worktree", "remove", "--force", str(folder)], cwd=_pg.ROOT
    )
    (folder / ".venv").symlink_to(_pg.ROOT / ".venv")
    return folder, commit


def paired_median(differences: np.ndarray, *, draws: int = 2000) -> dict[str, float]:
    rng = np.random.default_rng(0)
    medians = [np.median(rng.choice(differences, len(differences))) for _ in range(draws)]
    return {
        "median": float(np.median(differences)),
        "low": float(np.percentile(medians, 2.5)),
        "high": float(np.percentile(medians, 97.5)),
    }


def gunicorn_config(root: Path) -> str:
    """The checkout's deployed gunicorn settings: in deploy/ since it was moved there, in the
    project package before."""
    moved = root / "deploy" / "gunicorn.conf.py"
    return str(moved) if moved.exists() else "python:siamweb.gunicorn_config"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the earlier commit (any git revision)")
    parser.add_argument("--single", type=int, default=600, help="one-text requests to each")
    parser.add_argument("--batches", type=int, default=8, help=f"{BATCH}-text requests to each")
    args = parser.parse_args()
    before_root, before = worktree_of(args.before)
    after = git("rev-parse", "--short", "HEAD")
    if git("status", "--porcelain", "--untracked-files=no"):
        after += " with uncommitted changes"
    _pg.onet_live()
    user, _ = user_ensure(username="bench-paired", password="bench-pass-123", admin=False)
    token = Token.objects.create(user=user).key
    machine = _pg.machine()
    connections.close_all()
    singles, batches = singles_and_batches(args.single, args.batches)
    servers, clients = [], {}
    try:
        for name, root in (("before", before_root), ("after", _pg.ROOT)):
            port = free_port()
            servers.append(start_gunicorn(
                port=port, workers=2, threads=2, torch_threads=1,
                config=gunicorn_config(root), root=root,
            ))  # fmt: skip
            clients[name] = NormalizeClient(port, token, PATH)
        for client in clients.values():
            for text in singles[:40]:  # both workers of each server warm
                client.normalize([text])
        seconds = {"single": {"before": [], "after": []}, "batch": {"before": [], "after": []}}
        same = {"single": 0, "batch": 0}
        for kind, requests in (("single", [[text] for text in singles]), ("batch", batches)):
            for i, texts in enumerate(requests):
                answers = {}
                for name in ("before", "after") if i % 2 == 0 else ("after", "before"):
                    started = time.perf_counter()
                    answers[name] = clients[name].normalize(texts)
                    seconds[kind][name].append(time.perf_counter() - started)
                same[kind] += answers["before"] == answers["after"]
    finally:
        for server in servers:
            stop_gunicorn(server)
    single = {name: np.array(values) * 1000 for name, values in seconds["single"].items()}
    batch = {name: np.array(values) for name, values in seconds["batch"].items()}
    texts_per_s = {
        name: round(BATCH * len(values) / values.sum(), 1) for name, values in batch.items()
    }
    result = {
        "machine": machine,
        "before": before,
        "after": after,
        "inputs": "JobBERT vacancy titles (real), sampled with seed 24",
        "single": {name: _pg.summary(list(values)) for name, values in single.items()},
        "single_after_minus_before_ms": paired_median(single["after"] - single["before"]),
        "single_answers_identical": f"{same['single']}/{len(singles)}",
        "batch_texts_per_s": texts_per_s,
        "batch_answers_identical": f"{same['batch']}/{len(batches)}",
    }
    difference = result["single_after_minus_before_ms"]
    print(f"machine: {machine}")
    print(f"{'measure':44} {before:>12} {after:>12}")
    for quantity in ("p50_ms", "p99_ms"):
        print(f"{'one text per request, ' + quantity:44} "
              f"{result['single']['before'][quantity]:12.2f} "
              f"{result['single']['after'][quantity]:12.2f}")  # fmt: skip
    print(f"{f'{BATCH} texts per request, texts/s':44} "
          f"{result['batch_texts_per_s']['before']:12,.0f} "
          f"{result['batch_texts_per_s']['after']:12,.0f}")  # fmt: skip
    print(
        f"one text, after - before, paired median: {difference['median']:+.2f} ms "
        f"(95% bootstrap [{difference['low']:+.2f}, {difference['high']:+.2f}])"
    )
    print(
        f"identical answers: {result['single_answers_identical']} one at a time, "
        f"{result['batch_answers_identical']} batches"
    )
    _pg.write_results("http_paired", result)


if __name__ == "__main__":
    main()
