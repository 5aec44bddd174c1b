"""Calibration of the match probability on real verdicts (JobBERT → ESCO).

The served model answers every title of the curator stream; a curator's verdict says whether
its top group was right (confirm) or not (reassign to the title's occupation). The calibrator
(models_app/siamese/calibration.py) is fitted on those verdicts and measured on dev-unseen
titles nobody judged: the expected calibration error (ECE, 10 bins) of the raw top score taken
as a probability and of the calibrated probability, a reliability table and plot, and what
"accept every answer above p" gives: the share of answers accepted and how many of them are
right.

    .venv/bin/python bench/calibration.py --model var/towers/esco-h200

Prints a table and writes bench/results/calibration.json and calibration.svg.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench.jobbert_data import SHARED_DATA, esco_members, jobbert_split  # noqa: E402
from models_app.charts import Chart, Series, line_chart_svg  # noqa: E402
from models_app.siamese.calibration import (  # noqa: E402
    Calibrator,
    expected_calibration_error,
    reliability,
)
from models_app.siamese.encoders import load_encoder  # noqa: E402
from models_app.siamese.hybrid_matcher import HybridMatcher  # noqa: E402
from models_app.siamese.specs import STUDENT_SPEC, parse_search_config  # noqa: E402

THRESHOLDS = (0.3, 0.5, 0.7, 0.9)


def answers(matcher, cases) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per case: the top group's score, its margin over the runner-up, and whether it is right."""
    ranked = matcher.rank_hits([text for text, _ in cases], 2)
    scores = np.array([hits[0].score if hits else 0.0 for hits in ranked])
    margins = np.array([hits[0].score - hits[1].score if len(hits) > 1 else 1.0 for hits in ranked])
    right = np.array(
        [
            bool(hits) and hits[0].group_id == gold
            for hits, (_, gold) in zip(ranked, cases, strict=True)
        ]
    )
    return scores, margins, right


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="a model folder trained on ESCO")
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/calibration.json")
    args = parser.parse_args()
    members, _, ids = esco_members(args.data)
    dev, stream = jobbert_split(args.data)
    encoder = load_encoder(args.model)
    # As the tower's and the student's specs serve: the embedding alone.
    search = parse_search_config({"search": STUDENT_SPEC["search"]})
    matcher = HybridMatcher(
        encoder, [t for _, t in members], [g for g, _ in members], config=search
    )
    fit_scores, fit_margins, fit_right = answers(matcher, [(r.text, ids[r.code]) for r in stream])
    calibrator = Calibrator.fit(fit_scores, fit_margins, fit_right)
    scores, margins, right = answers(matcher, [(r.text, ids[r.code]) for r in dev])
    calibrated = calibrator.probabilities(scores, margins)
    raw = np.clip(scores, 0.0, 1.0)
    accept = []
    for p in THRESHOLDS:
        taken = calibrated >= p
        accept.append({
            "threshold": p,
            "accepted_share": float(taken.mean()),
            "right_among_accepted": float(right[taken].mean()) if taken.any() else None,
        })  # fmt: skip
    result = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "model": str(args.model),
        "fitted_on_verdicts": len(fit_right),
        "measured_on_titles": len(right),
        "calibrator": calibrator.as_dict(),
        "accuracy": float(right.mean()),
        "ece_raw_score": expected_calibration_error(raw, right),
        "ece_calibrated": expected_calibration_error(calibrated, right),
        "reliability_raw": reliability(raw, right),
        "reliability_calibrated": reliability(calibrated, right),
        "accept_above": accept,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    chart = Chart(
        title="Reliability on dev-unseen: share right against the probability given",
        series=[
            Series("perfect calibration", [(0.0, 0.0), (1.0, 1.0)]),
            Series(
                "calibrated",
                [(r["mean_probability"], r["right"]) for r in result["reliability_calibrated"]],
            ),
            Series(
                "raw top score",
                [(r["mean_probability"], r["right"]) for r in result["reliability_raw"]],
            ),
        ],
        x_labels={0.0: "0", 0.5: "0.5", 1.0: "1"},
        y_range=(0.0, 1.0),
    )
    args.out.with_suffix(".svg").write_text(str(line_chart_svg(chart)))
    print(f"fitted on {len(fit_right)} verdicts; measured on {len(right)} dev-unseen titles")
    print(
        f"ECE: raw score {result['ece_raw_score']:.3f}, calibrated {result['ece_calibrated']:.3f}"
    )
    for row in accept:
        print(f"accept above {row['threshold']}: {row['accepted_share']:.3f} of answers, "
              f"{row['right_among_accepted']} right")  # fmt: skip


if __name__ == "__main__":
    main()
