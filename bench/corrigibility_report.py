"""The corrigibility benchmark's output: its table, its SVG chart and its targets read from the
rounds (bench/corrigibility_onet.py)."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


FROZEN = ("typos", "composition", "extra_words")
TARGET_BY_ITSELF = 0.95
TARGET_FROZEN_DROP = 0.01
TARGET_SECONDS = 300.0


# --- output ----------------------------------------------------------------------------------

COLUMNS = [
    "round",
    "model",
    "verdicts",
    "reassigned",
    "arrival",
    "round_itself",
    "all_itself",
    "reassigned_itself",
    "all_weights",
    "all_embedding",
    "variants",
    "variants_all",
    "variants_all_weights",
    "unjudged",
    "unjudged_weights",
    "never_seen",
    "never_weights",
    "never_embedding",
    "typos",
    "composition",
    "extra_words",
    "run",
    "seconds",
]


def table_row(row: dict) -> dict:
    def fixed(value):
        return None if value is None else f"{value:.3f}"

    run = row.get("retrain") or {}
    return {
        "round": row["round"],
        "model": row["model"],
        "verdicts": row.get("verdicts"),
        "reassigned": row.get("reassigned"),
        "arrival": fixed(row.get("arrival_accuracy")),
        "round_itself": fixed(row.get("round_by_itself")),
        "all_itself": fixed(row.get("all_by_itself")),
        "reassigned_itself": fixed(row.get("reassigned_by_itself")),
        "all_weights": fixed(row.get("all_weights_alone")),
        "all_embedding": fixed(row.get("all_embedding_alone")),
        "variants": fixed(row.get("variants")),
        "variants_all": fixed(row.get("variants_every_title")),
        "variants_all_weights": fixed(row.get("variants_every_title_weights_alone")),
        "unjudged": fixed(row.get("unjudged_every_title")),
        "unjudged_weights": fixed(row.get("unjudged_every_title_weights_alone")),
        "never_seen": fixed(row["never_seen"]),
        "never_weights": fixed(row.get("never_seen_weights_alone")),
        "never_embedding": fixed(row.get("never_seen_embedding_alone")),
        **{name: fixed(row["frozen"][name]) for name in FROZEN},
        "run": run.get("status"),
        "seconds": run.get("verdict_to_done_seconds"),
    }


SERIES = (
    ("all_by_itself", "corrected so far, by itself", "#1f77b4", ""),
    ("all_embedding_alone", "corrected so far, embedding alone", "#ff7f0e", "6 3"),
    ("variants", "new variants of corrected titles", "#17becf", ""),
    ("variants_every_title", "variants of every pool title", "#bcbd22", ""),
    ("variants_every_title_weights_alone", "pool variants, weights alone", "#bcbd22", "6 3"),
    ("unjudged_every_title", "unjudged, every held-out title", "#000000", ""),
    ("never_seen", "titles nobody corrects (served)", "#d62728", ""),
    ("never_seen_embedding_alone", "titles nobody corrects, embedding", "#e377c2", "6 3"),
    ("typos", "frozen: Typos", "#2ca02c", "2 3"),
    ("composition", "frozen: Composition", "#9467bd", "2 3"),
    ("extra_words", "frozen: Extra Words", "#8c564b", "2 3"),
)


def write_svg(rows: list[dict], path: Path, title: str) -> None:
    """A line chart of the per-round curves, by hand (no plotting library is a dependency)."""
    width, height = 800, 440
    left, right, top, bottom = 60, 270, 40, 50
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [
        value
        for row in rows
        for key, *_ in SERIES
        if (value := row["frozen"].get(key) if key in FROZEN else row.get(key)) is not None
    ]
    low = min(0.5, (int(min(values) * 20) / 20) if values else 0.5)
    rounds = [row["round"] for row in rows]
    last = max(rounds) or 1

    def x(round_number: int) -> float:
        return left + plot_w * round_number / last

    def y(value: float) -> float:
        return top + plot_h * (1 - (value - low) / (1 - low))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="22" font-size="14" font-weight="bold">{title}</text>',
    ]
    step = 0.05 if 1 - low <= 0.5 else 0.1
    tick = 1.0
    while tick >= low - 1e-9:
        parts.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" '
            f'stroke="#ddd"/><text x="{left - 8}" y="{y(tick) + 4:.1f}" '
            f'text-anchor="end">{tick:.2f}</text>'
        )
        tick = round(tick - step, 4)
    for round_number in rounds:
        parts.append(
            f'<text x="{x(round_number):.1f}" y="{top + plot_h + 18}" '
            f'text-anchor="middle">{round_number}</text>'
        )
    parts.append(
        f'<text x="{left + plot_w / 2}" y="{height - 12}" text-anchor="middle">'
        "round (verdicts so far / round size)</text>"
    )
    parts.append(
        f'<line x1="{left}" x2="{left + plot_w}" y1="{y(TARGET_BY_ITSELF):.1f}" '
        f'y2="{y(TARGET_BY_ITSELF):.1f}" stroke="#1f77b4" stroke-opacity="0.4" '
        'stroke-dasharray="8 4"/>'
    )
    parts.append(
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>'
    )
    for number, (key, label, colour, dash) in enumerate(SERIES):
        points = [
            (row["round"], row["frozen"].get(key) if key in FROZEN else row.get(key))
            for row in rows
        ]
        points = [(r, v) for r, v in points if v is not None]
        if points:
            path_data = " ".join(f"{x(r):.1f},{y(v):.1f}" for r, v in points)
            dashed = f' stroke-dasharray="{dash}"' if dash else ""
            parts.append(
                f'<polyline points="{path_data}" fill="none" stroke="{colour}" '
                f'stroke-width="2"{dashed}/>'
            )
            parts += [
                f'<circle cx="{x(r):.1f}" cy="{y(v):.1f}" r="3" fill="{colour}"/>'
                for r, v in points
            ]
        legend_y = top + 10 + 22 * number
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(
            f'<line x1="{left + plot_w + 15}" x2="{left + plot_w + 45}" y1="{legend_y}" '
            f'y2="{legend_y}" stroke="{colour}" stroke-width="2"{dashed}/>'
            f'<text x="{left + plot_w + 52}" y="{legend_y + 4}">{label}</text>'
        )
    legend_y = top + 10 + 22 * len(SERIES)
    parts.append(
        f'<line x1="{left + plot_w + 15}" x2="{left + plot_w + 45}" y1="{legend_y}" '
        f'y2="{legend_y}" stroke="#1f77b4" stroke-opacity="0.4" stroke-dasharray="8 4"/>'
        f'<text x="{left + plot_w + 52}" y="{legend_y + 4}">target {TARGET_BY_ITSELF:.2f}</text>'
    )
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    print(f"wrote {path.relative_to(path.parents[2])}")


def targets(rows: list[dict]) -> dict:
    """Each target of the issue against the figures, met or not."""
    retrained = [row for row in rows if row["round"] > 0 and row.get("retrain")]
    first = rows[0]
    drops = {
        name: round(
            max((first["frozen"][name] - row["frozen"][name] for row in retrained), default=0.0),
            4,
        )
        for name in FROZEN
    }
    never_seen = [row["never_seen"] for row in rows]
    variants_every_title = [row.get("variants_every_title") for row in rows]
    unjudged = [row.get("unjudged_every_title") for row in rows]
    runs = [
        {
            "round": row["round"],
            "new_verdicts": row["retrain"]["new_verdicts"],
            "status": row["retrain"]["status"],
            "seconds": row["retrain"]["verdict_to_done_seconds"],
        }
        for row in retrained
    ]
    # A run after a rejected one also learns the rejected round's verdicts, on a longer budget
    # (models_app.training.finetune_recipe.finetune_minutes): the target's "round of 500 verdicts"
    # is a run
    # on one round's new verdicts.
    round_size = max((row.get("verdicts") or 0 for row in retrained), default=0)
    one_round, backlog = [], []
    for run in runs:
        fits = run["new_verdicts"] is not None and run["new_verdicts"] <= round_size
        (one_round if fits else backlog).append(run)
    promoted = all(run["status"] == "promoted" for run in runs)

    def at_least(key: str, *, promoted_only: bool = False) -> dict:
        values = [
            row[key]
            for row in retrained
            if row[key] is not None
            and (not promoted_only or row["retrain"]["status"] == "promoted")
        ]
        return {
            "round_values": values,
            "met": bool(values) and min(values) >= TARGET_BY_ITSELF,
        }

    def rising(values: list) -> dict:
        return {
            "values": values,
            "met": None not in values and all(b > a for a, b in itertools.pairwise(values)),
        }

    return {
        "round_corrected_by_itself_at_least_0.95": at_least("round_by_itself"),
        # A rejected round's candidate does not go live: the live model is the one before.
        "round_corrected_by_itself_at_least_0.95_after_each_promotion": at_least(
            "round_by_itself", promoted_only=True
        ),
        "round_reassigned_by_itself_at_least_0.95": at_least("round_reassigned_by_itself"),
        "round_corrected_weights_alone_at_least_0.95": at_least("round_weights_alone"),
        "for_information_round_corrected_embedding_alone_at_least_0.95": at_least(
            "round_embedding_alone"
        ),
        # The unjudged input of every held-out title (see the module docstring), and its two
        # parts: titles the curators work through, and titles nobody corrects.
        "never_seen_rising_round_over_round": {
            "read_on": "unjudged_every_title",
            **rising(unjudged),
        },
        "for_information_variants_of_every_title_rising_round_over_round": rising(
            variants_every_title
        ),
        "for_information_titles_nobody_corrects_rising_round_over_round": rising(never_seen),
        "no_frozen_metric_down_more_than_1_point": {
            "largest_drop_from_round_0": drops,
            "met": all(drop <= TARGET_FROZEN_DROP for drop in drops.values()),
        },
        "last_verdict_to_promoted_at_most_300_s": {
            "runs": runs,
            "all_promoted": promoted,
            "read_on": "promoted runs on at most one round's new verdicts",
            "met": bool(one_round)
            and all(r["status"] == "promoted" for r in one_round)
            and max(r["seconds"] for r in one_round) <= TARGET_SECONDS,
            # Runs on a backlog (after a rejected or skipped round) train longer, up to 1.5 times.
            "for_information_backlog_runs": backlog,
        },
    }
