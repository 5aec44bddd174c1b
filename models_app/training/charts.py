"""Line charts as inline SVG, drawn on the server: no chart library, no CDN, and a page that
shows the same thing with scripts off."""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 640, 220
LEFT, RIGHT, TOP, BOTTOM = 44, 30, 12, 40
COLOURS = ("#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626", "#0891b2")


@dataclass
class Series:
    name: str
    points: list[tuple[float, float]]  # (x, y)


@dataclass
class Chart:
    title: str
    series: list[Series]
    x_labels: dict[float, str] = field(default_factory=dict)  # ticks on the x axis
    # (x, kind, title): a mark under the plot, e.g. a promotion or a rejection at that x.
    markers: list[tuple[float, str, str]] = field(default_factory=list)
    y_range: tuple[float, float] | None = None  # default: the data's, padded
    # What the values can be (a share: 0 to 1): the padding never takes the axis past them.
    y_bounds: tuple[float, float] | None = None

    def is_empty(self) -> bool:
        return not any(s.points for s in self.series)


def line_chart_svg(chart: Chart) -> SafeString:
    """The chart as an ``<svg>`` element; every text in it is escaped."""
    xs = [x for s in chart.series for x, _ in s.points] + [x for x, _, _ in chart.markers]
    ys = [y for s in chart.series for _, y in s.points]
    if not xs or not ys:
        return mark_safe("")
    x_low, x_high = min(xs), max(xs)
    if chart.y_range is not None:
        y_low, y_high = chart.y_range
    else:
        pad = max((max(ys) - min(ys)) * 0.1, 0.01)
        y_low, y_high = min(ys) - pad, max(ys) + pad
        if chart.y_bounds is not None:
            y_low, y_high = max(y_low, chart.y_bounds[0]), min(y_high, chart.y_bounds[1])
    span_x = (x_high - x_low) or 1.0
    span_y = (y_high - y_low) or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x_low) / span_x * plot_w

    def py(y: float) -> float:
        return TOP + (1 - (y - y_low) / span_y) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'class="chart" role="img" aria-label="{escape(chart.title)}" data-testid="chart">',
        f"<title>{escape(chart.title)}</title>",
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" '
        'stroke="#d1d5db"/>',
    ]
    for fraction in (0.0, 0.5, 1.0):
        value = y_low + fraction * span_y
        y = py(value)
        parts.append(
            f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end" font-size="10" '
            f'fill="#6b7280">{value:.2f}</text>'
        )
    for x, label in chart.x_labels.items():
        parts.append(
            f'<text x="{px(x):.1f}" y="{HEIGHT - BOTTOM + 14}" text-anchor="middle" '
            f'font-size="10" fill="#6b7280">{escape(label)}</text>'
        )
    for x, kind, title in chart.markers:
        colour = {"promote": "#16a34a", "reject": "#dc2626"}.get(kind, "#6b7280")
        parts.append(
            f'<g data-marker="{escape(kind)}"><title>{escape(title)}</title>'
            f'<line x1="{px(x):.1f}" x2="{px(x):.1f}" y1="{TOP}" y2="{TOP + plot_h}" '
            f'stroke="{colour}" stroke-dasharray="3 3" stroke-width="1"/>'
            f'<circle cx="{px(x):.1f}" cy="{TOP + 5}" r="4" fill="{colour}"/></g>'
        )
    legend_x = LEFT + 4
    for i, series in enumerate(chart.series):
        if not series.points:
            continue
        colour = COLOURS[i % len(COLOURS)]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in series.points)
        parts.append(
            f'<g data-series="{escape(series.name)}"><title>{escape(series.name)}</title>'
            f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>'
        )
        for x, y in series.points:
            parts.append(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}">'
                f"<title>{escape(series.name)}: {y:.3f}</title></circle>"
            )
        parts.append("</g>")
        # Each entry as wide as its name (about 5.6 px a character at 10 px): whole names.
        parts.append(
            f'<rect x="{legend_x}" y="{HEIGHT - 12}" width="10" height="3" fill="{colour}"/>'
            f'<text x="{legend_x + 14}" y="{HEIGHT - 8}" font-size="10" fill="#374151">'
            f"{escape(series.name)}</text>"
        )
        legend_x += 14 + round(5.6 * len(series.name)) + 18
    parts.append("</svg>")
    return mark_safe("".join(parts))
