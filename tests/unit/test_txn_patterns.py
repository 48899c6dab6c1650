"""The txn parse by patterns (checkers/txn/patterns.py) against the parse line by line as JSON: a Spark parse task
(checkers/txn/flat.py `parse_task`) returns the same stretch and writes the same bucket files either way, on
random corpora in kchaos's own form, split into random stretches, with random lines changed into other forms,
into other transactions, or into lines that are no JSON at all."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from corpora.txn import generate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_txn_corpus import shapes

from kchaos.checkers.history_scan import split
from kchaos.checkers.txn import flat
from kchaos.checkers.txn.patterns import Unsettled, scan


def kchaos_form(op: dict) -> str:
    return json.dumps(op, separators=(",", ":"))


def _number(line: str, rng: int, new: str) -> str:
    """`line` with one of the integers in its value (the `rng`-th, cyclically) written as `new` (a format)."""
    at = line.find('"value":')
    spots = [m for m in re.finditer(r"(?<=[\[,])-?\d+(?=[\],])", line) if m.start() > at] if at >= 0 else []
    if not spots:
        return line
    m = spots[rng % len(spots)]
    return line[:m.start()] + new.format(m.group()) + line[m.end():]


CHANGES = {
    "spaces": lambda op, line, k: json.dumps(op),
    "keys reordered": lambda op, line, k: kchaos_form({**{x: v for x, v in op.items() if x != "index"},
                                                       "index": op.get("index")}),
    "leading zero": lambda op, line, k: _number(line, k, "0{}"),
    "minus zero": lambda op, line, k: _number(line, k, "-0") if "0" in line else line,
    "beyond 64 bits": lambda op, line, k: _number(line, k, "99999999999999999999{}"),
    "a boolean": lambda op, line, k: _number(line, k, "true"),
    "another number": lambda op, line, k: _number(line, k, "{}1"),
    "dropped": lambda op, line, k: None,
    "twice": lambda op, line, k: line + "\n" + line,
    "cut short": lambda op, line, k: line[:len(line) // 2],
    "an error": lambda op, line, k: kchaos_form({**op, "error": 'x\u00e9 "q" \\ \n'}),
    "a bad escape": lambda op, line, k: line[:-1] + ',"error":"\\q"}',
    "a nemesis line": lambda op, line, k: line + '\n{"index":1,"time":2,"process":"nemesis","type":"info","f":"txn"}',
    "a non-ASCII byte": lambda op, line, k: line[:-1] + ',"error":"\udcff"}',
}


def parse(history: Path, stretches: list[tuple[int, int, int]], out: Path, patterns: bool, monkeypatch) -> list:
    """Each stretch's parse_task result (its fields, or the exception's type) and its bucket files' arrays."""
    if not patterns:
        def unsettled(*a):
            raise Unsettled
        monkeypatch.setattr(flat, "scan", unsettled)
    out.mkdir()
    got = []
    try:
        for r, (a, b, n0) in enumerate(stretches):
            try:
                s = flat.parse_task((str(history), r, a, b, n0, r == len(stretches) - 1, str(out), 2, 2))
            except Exception as e:  # both parses must fail alike, even where neither should
                got.append(type(e).__name__)
                continue
            fields = dict(vars(s))
            fields["writers"] = fields["writers"].tolist()
            fields["tails"], fields["first"] = list(fields["tails"].items()), list(fields["first"].items())
            got.append(fields)
    finally:
        monkeypatch.undo()
    for f in sorted(out.glob("*.npz")):
        with np.load(f) as z:
            got.append((f.name, {k: z[k].tolist() for k in z}))
    return got


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shapes(), st.integers(1, 6), st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(sorted(CHANGES)),
                                                       st.integers(0, 50)), max_size=4))
def test_patterns_parse_every_stretch_as_json_does(tmp_path_factory, monkeypatch, shape, parts, changes):
    corpus = generate(**shape)
    lines: list[str | None] = [kchaos_form(op) for op in corpus.ops]
    for at, change, k in changes:
        if lines:
            i = at % len(lines)
            lines[i] = CHANGES[change](corpus.ops[i], lines[i], k) if lines[i] is not None else None
    run = tmp_path_factory.mktemp("txn")
    history = run / "history.jsonl"
    history.write_bytes("".join(line + "\n" for line in lines if line is not None).encode("utf-8",
                                                                                       "surrogateescape"))
    stretches = split(str(history), parts)
    assert parse(history, stretches, run / "fast", True, monkeypatch) == \
        parse(history, stretches, run / "slow", False, monkeypatch)


def test_a_stretch_in_kchaos_form_is_read_by_the_patterns():
    corpus = generate(7, txns=40, processes=3, cut_off=True)
    data = "".join(kchaos_form(op) + "\n" for op in corpus.ops).encode()
    got = scan(data, 1, True, json.loads)
    assert got.invoked == sum(1 for op in corpus.ops if op["f"] == "txn" and op["type"] == "invoke")
    assert len(got.txns) == got.invoked - 1 and got.parser.tails  # the one the run cut off stays open


@pytest.mark.parametrize("line", [
    '{"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "txn", "value": [["poll"]]}',
    '{"index":0,"time":0,"process":0,"type":"ok","f":"txn","value":[["poll",[]]]}\n'
    '{"index":1,"time":0,"process":0,"type":"ok","f":"txn","value":[["poll",[]]]}',
    '{"index":0,"time":0,"process":0,"type":"invoke","f":"txn","value":[["send",1,2]]}\n'
    '{"index":1,"time":0,"process":0,"type":"ok","f":"txn","value":[["send",1,3,0,0]]}',
])
def test_what_the_patterns_cannot_decide_is_left_to_json(line):
    with pytest.raises(Unsettled):
        scan((line + "\n").encode(), 1, True, json.loads)


def test_open_invocations_and_heads_stay_in_the_order_json_keeps_them(tmp_path, monkeypatch):
    # Process 0's first invocation is replaced by its second after process 1 invoked: LineParser keeps process 0
    # first among the open ones, where it began, and so must the patterns. The next stretch begins with the
    # completions of process 1, then 0: heads in the order of their lines.
    ops = [{"process": p, "type": "invoke", "f": "txn", "value": [["send", p, 10 + i]]}
           for i, p in enumerate([0, 1, 0])]
    ops += [{"process": 1, "type": "ok", "f": "txn", "value": [["send", 1, 11, 1, 0]]},
            {"process": 0, "type": "ok", "f": "txn", "value": [["send", 0, 12, 0, 0]]}]
    lines = [(kchaos_form({"index": i, "time": i, **op}) + "\n").encode() for i, op in enumerate(ops)]
    history = tmp_path / "history.jsonl"
    history.write_bytes(b"".join(lines))
    cut = sum(map(len, lines[:3]))
    stretches = [(0, cut, 1), (cut, cut + sum(map(len, lines[3:])), 4)]
    fast = parse(history, stretches, tmp_path / "fast", True, monkeypatch)
    assert [p for p, _ in fast[0]["tails"]] == [0, 1] and [h.process for h in fast[1]["heads"]] == [1, 0]
    assert fast == parse(history, stretches, tmp_path / "slow", False, monkeypatch)
