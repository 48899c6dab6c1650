"""Fault labels above a plot, in rows so that none is drawn over another; latency quantiles per time bucket."""
from kchaos.reports.run.plot_frame import LABEL_PT, Span, figure, label_spans, xlim


def _labels(spans, ts=(0, 60)):
    fig, (ax,) = figure(1, 3.0)
    xlim([ax], spans, ts)
    label_spans(ax, spans)
    return {t.get_text(): t for t in ax.texts}


def test_labels_that_would_overlap_go_in_rows_and_the_rest_in_the_first():
    spans = [Span(10, 20, "kill-leader", "#1f77b4"), Span(10.2, 25, "partition-leader", "#ff7f0e"),
             Span(40, 50, "power-fail-all", "#d62728", applied=False), Span(21, 30, "pause", "#2ca02c")]
    labels = _labels(spans)
    rows = {text: round((t.xyann[1] - 2) / (LABEL_PT + 2)) for text, t in labels.items()}
    assert rows == {"kill-leader": 0, "partition-leader": 1, "pause": 0, "power-fail-all (not applied)": 0}
    assert all(t.xy[0] == s.start for s, t in zip(sorted(spans, key=lambda s: s.start),
                                                  sorted(labels.values(), key=lambda t: t.xy[0])))


def test_many_spans_are_left_to_the_legend():
    spans = [Span(i, i + 0.5, f"f{i}", "#1f77b4") for i in range(13)]
    assert _labels(spans) == {}


def test_latency_quantiles_per_second_by_nearest_rank():
    import numpy as np

    from kchaos.reports.run.plots import quantiles_over_time
    invoke = np.array([0.1] * 100 + [2.5, 2.6])  # 100 sends in second 0, none in second 1, two in second 2
    latency = np.array([float(i) for i in range(1, 101)] + [7.0, 3.0])
    starts, q = quantiles_over_time(invoke, latency)
    assert list(starts) == [0.0, 1.0, 2.0]
    assert (q["p50"][0], q["p95"][0], q["p99"][0], q["max"][0]) == (50.0, 95.0, 99.0, 100.0)
    assert np.isnan(q["p50"][1]) and (q["p50"][2], q["max"][2]) == (3.0, 7.0)
    wide, _ = quantiles_over_time(np.array([0.0, 999.0]), np.array([1.0, 2.0]))  # a long run: wider buckets
    assert len(wide) <= 240 and wide[1] - wide[0] == 5.0
