"""When the audit pauses auto-coding: how often a policy that codes above its target is paused
anyway, and how soon one that codes below it is, by the bound the pause compares.

Auto-coding pauses when the audited answers' precision is shown below the target: a one-sided
95% upper bound, checked after every audit verdict (``auto_coding.auto_coding_audit_check``).
Checked that often, a bound that undercovers with few answers pauses good policies. Simulated:
a policy whose answers are right with a true precision ``p``, audited one answer at a time up to
``--audits``, against a 90% target; per bound, the share of runs paused and the median audit at
which they were. ``wilson``: Wilson's score bound (the pause until 2026-12-06); ``exact``:
Clopper-Pearson's (``vouching.precision_exact_upper_bound``, the pause now).

    .venv/bin/python bench/audit_pause.py [--runs 1000] [--audits 500]

Prints a table and writes bench/results/audit_pause.json.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from statistics import NormalDist

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from models_app.siamese.vouching import precision_exact_upper_bound  # noqa: E402

TARGET = 0.9
PRECISIONS = (0.97, 0.95, 0.92, 0.85, 0.80, 0.70)


def wilson_upper(right: int, answers: int, confidence: float = 0.95) -> float:
    z = NormalDist().inv_cdf(confidence)
    share = right / answers
    centre = share + z * z / (2 * answers)
    spread = z * math.sqrt(share * (1 - share) / answers + z * z / (4 * answers * answers))
    return min(1.0, (centre + spread) / (1 + z * z / answers))


BOUNDS = {"wilson": wilson_upper, "exact": precision_exact_upper_bound}


def paused_at(outcomes: np.ndarray, bound, target: float, cache: dict) -> int | None:
    """The audit after which the bound first falls below the target, or None."""
    right = 0
    for answers, outcome in enumerate(outcomes, start=1):
        right += int(outcome)
        key = (right, answers)
        if key not in cache:
            cache[key] = bound(right, answers) < target
        if cache[key]:
            return answers
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--audits", type=int, default=500)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for precision in PRECISIONS:
        outcomes = rng.random((args.runs, args.audits)) < precision  # the same runs per bound
        row = {"true_precision": precision}
        for name, bound in BOUNDS.items():
            cache: dict = {}
            found = [paused_at(run, bound, TARGET, cache) for run in outcomes]
            hit = [a for a in found if a is not None]
            row[name] = {
                "paused_share": round(len(hit) / args.runs, 4),
                "median_audit_paused_at": float(np.median(hit)) if hit else None,
            }
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print(f"target {TARGET:.0%}, {args.runs} runs of up to {args.audits} audits")
    print("| true precision | paused, Wilson (median audit) | paused, exact (median audit) |")
    print("|---|---|---|")
    for row in rows:
        cells = [
            f"{row[n]['paused_share']:.1%} ({row[n]['median_audit_paused_at'] or '-'})"
            for n in BOUNDS
        ]
        print(f"| {row['true_precision']:.0%} | {cells[0]} | {cells[1]} |")
    out = ROOT / "bench" / "results" / "audit_pause.json"
    out.write_text(
        json.dumps(
            {"target": TARGET, "runs": args.runs, "audits": args.audits, "rows": rows}, indent=2
        )
        + "\n"
    )
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
