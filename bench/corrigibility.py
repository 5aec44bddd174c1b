"""Corrigibility: do curators' verdicts teach the model, round after round, through the product?

Two modes, each a script of its own with its options in its docstring:

- ``--mode real`` (the default, issue #20): JobBERT's curator stream judged over the REST API on
  ESCO, never-judged dev-unseen titles measured (``bench/corrigibility_real.py``);
- ``--mode onet``: the synthetic mode, held-out O*NET titles in generated job-ad words
  (``bench/corrigibility_onet.py``).

    .venv/bin/python bench/corrigibility.py --start FOLDER|pretrained [--rounds 4] ...
    .venv/bin/python bench/corrigibility.py --mode onet [--rounds 4] ...
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

MODES = {"real": "corrigibility_real.py", "onet": "corrigibility_onet.py"}


def split_mode(argv: list[str]) -> tuple[str, list[str]]:
    """The mode asked for (``--mode M`` or ``--mode=M``), and the other arguments."""
    rest, mode = [], "real"
    arguments = iter(argv)
    for argument in arguments:
        if argument == "--mode":
            mode = next(arguments, "")
        elif argument.startswith("--mode="):
            mode = argument.split("=", 1)[1]
        else:
            rest.append(argument)
    if mode not in MODES:
        raise SystemExit(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
    return mode, rest


def main() -> None:
    mode, rest = split_mode(sys.argv[1:])
    script = Path(__file__).resolve().parent / MODES[mode]
    sys.argv = [str(script), *rest]
    runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main()
