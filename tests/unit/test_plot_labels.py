"""Fault labels above a plot: each at its span's start, in rows, so that none is drawn over another."""
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
