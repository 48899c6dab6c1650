"""`split` cuts a history into stretches at newlines, reading it a block at a time: the same stretches as the
definition, which reads the whole file at once."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kchaos.checkers import history_scan
from kchaos.checkers.history_scan import split


def _whole(data: bytes, parts: int) -> list[tuple[int, int, int]]:
    """The definition: the k-th cut follows the first newline at or after k/parts of the file."""
    size, cuts = len(data), [0]
    for k in range(1, parts):
        at = data.find(b"\n", max(cuts[-1], size * k // parts))
        if at < 0 or at + 1 >= size:
            break
        cuts.append(at + 1)
    cuts.append(size)
    out, line = [], 1
    for a, b in zip(cuts, cuts[1:]):
        if b > a:
            out.append((a, b, line))
            line += data.count(b"\n", a, b)
    return out or [(0, 0, 1)]


def test_the_stretches_are_the_definitions_for_any_file_and_block_size(tmp_path_factory, monkeypatch):
    tmp = tmp_path_factory.mktemp("split")

    @settings(max_examples=300, deadline=None)
    @given(st.binary(max_size=200).map(lambda b: bytes(b"ab\n"[x % 3] for x in b)), st.integers(1, 12),
           st.integers(1, 9))
    def check(data, parts, block):
        path = tmp / "history.jsonl"
        path.write_bytes(data)
        monkeypatch.setattr(history_scan, "CHUNK_BYTES", block)
        assert split(str(path), parts) == _whole(data, parts)
    check()
