"""A small line plot of one number over a suite's nights, as inline SVG (no script, no image file).

It is drawn for reading at a glance beside a table row: one point per night, a gap where a night has no value,
the last value written at the end, and the highest value above it.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from markupsafe import Markup, escape

__all__ = ["sparkline"]

STEP, HEIGHT, PAD, LABEL = 18, 34, 4, 64  # px between nights, plot height, padding, room for the last value


def sparkline(values: Sequence[float | None], fmt: Callable[[float], str], title: str,
              colours: Sequence[str] | None = None) -> Markup:
    """An SVG line of `values` (None: no value that night) with `fmt(last value)` after it and `fmt(max)` as its
    scale; `colours` (one per value) colour the points, `title` is the tooltip and accessible name."""
    known = [v for v in values if v is not None]
    width = PAD * 2 + STEP * max(len(values) - 1, 0) + LABEL
    if not known:
        return Markup('<span class="muted">no data</span>')
    top = max(known) or 1.0
    y = lambda v: PAD + (HEIGHT - 2 * PAD) * (1 - v / top)  # noqa: E731 - zero at the bottom, the max at the top
    x = lambda i: PAD + STEP * i  # noqa: E731
    parts: list[str] = []
    run: list[str] = []
    for i, v in enumerate(list(values) + [None]):
        if v is None:
            if len(run) > 1:
                parts.append(f'<polyline fill="none" stroke="#555" stroke-width="1.5" points="{" ".join(run)}"/>')
            run = []
        else:
            run.append(f"{x(i):.1f},{y(v):.1f}")
    for i, v in enumerate(values):
        if v is not None:
            c = colours[i] if colours else "#555"
            parts.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="3" fill="{c}"><title>{escape(fmt(v))}'
                         f'</title></circle>')
    last = next(v for v in reversed(values) if v is not None)
    lx = x(len(values) - 1) + 8
    parts.append(f'<text x="{lx:.0f}" y="{HEIGHT / 2 + 4:.0f}" font-size="12" fill="#222">{escape(fmt(last))}</text>')
    parts.append(f'<text x="{lx:.0f}" y="10" font-size="9" fill="#888">max {escape(fmt(max(known)))}</text>')
    return Markup(f'<svg class="spark" width="{width}" height="{HEIGHT}" role="img" aria-label="{escape(title)}">'
                  f'<title>{escape(title)}</title>'
                  f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{x(len(values) - 1)}" y2="{HEIGHT - PAD}" '
                  f'stroke="#ddd"/>{"".join(parts)}</svg>')
