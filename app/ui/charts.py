"""Charts drawn as inline SVG, nothing fetched or run in the page: mean reward with its 95 % interval per policy,
a histogram of episode rewards, and lines over time (a pool's sessions and replicas). Every label is escaped."""

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

WIDTH, BAR_HEIGHT, LINE_HEIGHT = 460, 22, 150
_COLORS = ("#f97316", "#3b82f6", "#16a34a", "#a855f7", "#ef4444", "#0ea5e9")


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    half_width: float | None = None  # of the 95 % interval around value
    muted: bool = False  # a baseline


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _span(low: float, high: float) -> tuple[float, float]:
    if low == high:
        return low - 1, high + 1
    return low, high


def bars_with_intervals(bars: Sequence[Bar], title: str) -> str:
    """Horizontal bars from zero (or the lowest value, when some are negative), each with its interval's whiskers."""
    if not bars:
        return ""
    label_w, right = 150, 60
    low = min(0.0, *(b.value - (b.half_width or 0) for b in bars))
    high = max(0.0, *(b.value + (b.half_width or 0) for b in bars))
    low, high = _span(low, high)
    plot = WIDTH - label_w - right

    def x(v: float) -> float:
        return label_w + (v - low) / (high - low) * plot

    height = BAR_HEIGHT * len(bars) + 24
    parts = [f'<line x1="{x(0):.1f}" y1="4" x2="{x(0):.1f}" y2="{height - 18}" class="axis"/>']
    for i, bar in enumerate(bars):
        top = 6 + i * BAR_HEIGHT
        start, end = sorted((x(0), x(bar.value)))
        kind = "bar muted" if bar.muted else "bar"
        parts.append(
            f'<text x="{label_w - 6}" y="{top + 13}" class="label" text-anchor="end">{_e(bar.label[:24])}</text>'
        )
        parts.append(
            f'<rect x="{start:.1f}" y="{top + 2}" width="{max(end - start, 1):.1f}" height="14" class="{kind}"/>'
        )
        if bar.half_width:
            a, b = x(bar.value - bar.half_width), x(bar.value + bar.half_width)
            parts.append(
                f'<path d="M{a:.1f},{top + 9}H{b:.1f}M{a:.1f},{top + 4}V{top + 14}M{b:.1f},{top + 4}V{top + 14}" '
                'class="whisker"/>'
            )
        ci = f" ± {bar.half_width:.3f}" if bar.half_width else ""
        parts.append(f'<text x="{WIDTH - right + 4}" y="{top + 13}" class="value">{bar.value:.3f}{_e(ci)}</text>')
    parts.append(f'<text x="{x(low):.1f}" y="{height - 4}" class="tick">{low:g}</text>')
    parts.append(f'<text x="{x(high):.1f}" y="{height - 4}" class="tick" text-anchor="end">{high:g}</text>')
    return _svg(title, height, parts)


def histogram(values: Sequence[float], title: str, bins: int = 10) -> str:
    """Counts of values in equal bins between their lowest and highest."""
    if not values:
        return ""
    low, high = min(values), max(values)
    count = 1 if low == high else min(bins, max(1, len(set(values))))
    width = (high - low) / count if high > low else 1.0
    counts = [0] * count
    for v in values:
        counts[min(int((v - low) / width), count - 1) if high > low else 0] += 1
    height, bottom, left = LINE_HEIGHT, LINE_HEIGHT - 24, 30
    plot_w = WIDTH - left - 10
    tallest = max(counts)
    parts = [f'<line x1="{left}" y1="{bottom}" x2="{WIDTH - 10}" y2="{bottom}" class="axis"/>']
    for i, n in enumerate(counts):
        h = (bottom - 10) * n / tallest
        bar_x = left + i * plot_w / count
        edge = low + i * width
        parts.append(
            f'<rect x="{bar_x + 1:.1f}" y="{bottom - h:.1f}" width="{plot_w / count - 2:.1f}" height="{h:.1f}" '
            f'class="bar" data-count="{n}"><title>{n} episode{"s" if n != 1 else ""}: '
            f"{edge:.3g} to {edge + width:.3g}</title></rect>"
        )
        if n:
            parts.append(f'<text x="{bar_x + plot_w / count / 2:.1f}" y="{bottom - h - 3:.1f}" class="tick" '
                         f'text-anchor="middle">{n}</text>')  # fmt: skip
    parts.append(f'<text x="{left}" y="{height - 6}" class="tick">{low:.3g}</text>')
    parts.append(f'<text x="{WIDTH - 10}" y="{height - 6}" class="tick" text-anchor="end">{high:.3g}</text>')
    return _svg(title, height, parts)


def lines_over_time(series: dict[str, Sequence[tuple[float, float]]], title: str) -> str:
    """Step lines of (seconds, value) points, one per named series, on one time axis from the first point."""
    points = [p for s in series.values() for p in s]
    if len(points) < 2:
        return ""
    t0, t1 = min(t for t, _ in points), max(t for t, _ in points)
    t0, t1 = _span(t0, t1)
    top_value = max(1.0, max(v for _, v in points))
    left, bottom, right = 30, LINE_HEIGHT - 24, WIDTH - 90
    parts = [f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" class="axis"/>']

    def xy(t: float, v: float) -> tuple[float, float]:
        return left + (t - t0) / (t1 - t0) * (right - left), bottom - v / top_value * (bottom - 10)

    for i, (name, values) in enumerate(series.items()):
        if not values:
            continue
        color = _COLORS[i % len(_COLORS)]
        path, last = [], None
        for t, v in sorted(values):
            x, y = xy(t, v)
            path.append(f"M{x:.1f},{y:.1f}" if last is None else f"H{x:.1f}V{y:.1f}")
            last = (x, y)
        parts.append(f'<path d="{"".join(path)}" class="series" stroke="{color}" data-series="{_e(name)}"/>')
        parts.append(f'<text x="{right + 6}" y="{14 + 16 * i}" class="label" fill="{color}">{_e(name)} '
                     f"{sorted(values)[-1][1]:g}</text>")  # fmt: skip
    parts.append(f'<text x="{left - 4}" y="14" class="tick" text-anchor="end">{top_value:g}</text>')
    parts.append(f'<text x="{left}" y="{LINE_HEIGHT - 6}" class="tick">{_clock(t1 - t0)} ago</text>')
    parts.append(f'<text x="{right}" y="{LINE_HEIGHT - 6}" class="tick" text-anchor="end">now</text>')
    return _svg(title, LINE_HEIGHT, parts)


def _clock(seconds: float) -> str:
    minutes, rest = divmod(math.ceil(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


def _svg(title: str, height: float, parts: Sequence[str]) -> str:
    return (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height:.0f}" width="{WIDTH}" height="{height:.0f}" role="img" '
        f'aria-label="{_e(title)}"><title>{_e(title)}</title>{"".join(parts)}</svg>'
    )
