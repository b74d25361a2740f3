"""Charts as inline SVG: bars with their intervals, a histogram of rewards, lines over time; labels escaped."""

import re

from app.ui.charts import Bar, bars_with_intervals, histogram, lines_over_time


def test_bars_have_whiskers_where_there_is_an_interval_and_baselines_are_muted() -> None:
    svg = bars_with_intervals([Bar("model", 0.75, 0.1), Bar("random", 0.2, None, muted=True)], "mean reward")
    assert svg.startswith('<svg class="chart"') and 'aria-label="mean reward"' in svg
    assert svg.count('class="bar"') == 1 and svg.count('class="bar muted"') == 1
    assert svg.count('class="whisker"') == 1 and "0.750 ± 0.100" in svg
    widths = [float(w) for w in re.findall(r'<rect x="[\d.]+" y="[\d.]+" width="([\d.]+)"', svg)]
    assert widths[0] > widths[1] * 3  # 0.75 against 0.2, from zero
    assert bars_with_intervals([], "none") == ""


def test_negative_rewards_are_drawn_from_zero_leftwards() -> None:
    svg = bars_with_intervals([Bar("maze walker", -0.3), Bar("solver", 0.9)], "mean reward")
    zero = float(re.search(r'<line x1="([\d.]+)"', svg).group(1))  # type: ignore[union-attr]
    starts = [float(x) for x in re.findall(r'<rect x="([\d.]+)"', svg)]
    assert starts[0] < zero and abs(starts[1] - zero) < 0.1


def test_a_histogram_counts_every_value_once() -> None:
    svg = histogram([0, 0, 0.5, 1, 1, 1], "episode rewards")
    counts = [int(n) for n in re.findall(r'data-count="(\d+)"', svg)]
    assert sum(counts) == 6 and max(counts) == 3
    assert 'data-count="6"' in histogram([1, 1, 1, 1, 1, 1], "all the same")
    assert histogram([], "none") == ""


def test_lines_over_time_name_their_series_and_escape_them() -> None:
    svg = lines_over_time({"sessions": [(-10, 0), (-5, 3), (0, 2)], "<b>replicas</b>": [(-10, 1), (0, 2)]}, "pool")
    assert 'data-series="sessions"' in svg and "&lt;b&gt;replicas&lt;/b&gt;" in svg and "<b>" not in svg
    assert "10 s ago" in svg
    assert lines_over_time({"sessions": [(0, 1)]}, "one point") == ""
