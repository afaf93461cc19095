"""Lag over time as an inline SVG, made on the server: no script, no external asset."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

#: One colour per series, repeated when there are more (colour-blind safe, Okabe-Ito).
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442")
WIDTH, HEIGHT = 720, 240
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 12, 36


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S")


def _colour(series: Mapping[str, object], label: str) -> str:
    return COLOURS[sorted(series).index(label) % len(COLOURS)]


def chart_legend(series: Mapping[str, object]) -> list[tuple[str, str]]:
    """(label, colour) of each series, as the chart draws them."""
    return [(label, _colour(series, label)) for label in sorted(series)]


def lag_chart(series: Mapping[str, Sequence[tuple[int, int]]], title: str) -> str:
    """An SVG line chart of each series' (time ms, lag) points; a note when there are none."""
    points = [p for values in series.values() for p in values]
    if not points:
        return (
            f'<svg role="img" aria-label="{html.escape(title)}" width="{WIDTH}" height="40">'
            '<text x="8" y="24">no lag history yet</text></svg>'
        )
    t0, t1 = min(t for t, _ in points), max(t for t, _ in points)
    top = max(max(lag for _, lag in points), 1)
    span = max(t1 - t0, 1)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(t: int) -> float:
        return LEFT + (t - t0) / span * plot_w

    def y(lag: int) -> float:
        return TOP + plot_h - lag / top * plot_h

    parts = [
        f'<svg role="img" aria-label="{html.escape(title)}" class="lag-chart" '
        f'width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        'xmlns="http://www.w3.org/2000/svg">',
        f"<title>{html.escape(title)}</title>",
        f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - RIGHT}" y2="{TOP + plot_h}" '
        'stroke="#888"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" stroke="#888"/>',
        f'<text x="{LEFT - 6}" y="{TOP + 10}" text-anchor="end" font-size="11">{top:,}</text>',
        f'<text x="{LEFT - 6}" y="{TOP + plot_h}" text-anchor="end" font-size="11">0</text>',
        f'<text x="{LEFT}" y="{HEIGHT - 12}" font-size="11">{_clock(t0)}</text>',
        f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 12}" text-anchor="end" font-size="11">'
        f"{_clock(t1)} UTC</text>",
    ]
    for label, values in sorted(series.items()):
        colour = _colour(series, label)
        ordered = sorted(values)
        path = " ".join(f"{x(t):.1f},{y(lag):.1f}" for t, lag in ordered)
        parts.append(
            f'<polyline class="series" data-series="{html.escape(label)}" fill="none" '
            f'stroke="{colour}" stroke-width="2" points="{path}"/>'
        )
        for t, lag in ordered:
            parts.append(
                f'<circle cx="{x(t):.1f}" cy="{y(lag):.1f}" r="2.5" fill="{colour}">'
                f"<title>{html.escape(label)} {_clock(t)}: lag {lag:,}</title></circle>"
            )
    parts.append("</svg>")
    return "".join(parts)
