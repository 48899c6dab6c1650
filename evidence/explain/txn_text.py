"""How `kchaos explain` tells a txn run's anomalous transactions, from txn_explanation.json's form
(`TxnExplanation.to_dict()`).

`txn_lines(explanation)` gives one summary line (the anomalies, then the
transactions grouped by cause), then per transaction a head line (the op) and
indented lines: the history line, the producer, each value's fate, the
markers per partition, the coordinator's states, the client's log lines,
and the cause. Lines are never wrapped; times are history seconds.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kchaos.evidence.explain.text import MAX_CONSOLE_GROUPS, prefixed

__all__ = ["INDENT", "txn_console_lines", "txn_lines", "txn_story", "txn_summary"]

INDENT = "    "


def _s(x: float | None) -> str:
    return "?" if x is None else f"{x:.3f} s"


def _send(s: list[Any]) -> str:
    _, value, p, off = s
    return f"{value} → " + ("?" if p is None else f"p{p}/{'?' if off is None else off}")


def _head(t: Mapping[str, Any]) -> str:
    kinds = ", ".join(k if not v else f"{k} {', '.join(map(str, v))}" for k, v in t["anomalies"].items())
    err = f" ({t['error']})" if t.get("error") else ""
    return (f"op {t['index']} [{kinds}]: process {t['process']}, {t['outcome']} at {_s(t.get('complete_s'))}{err}, "
            f"invoked at {_s(t['invoke_s'])}, sent " + (", ".join(_send(s) for s in t["sends"]) or "nothing"))


def _marker(m: Mapping[str, Any]) -> str:
    ce = m.get("coordinator_epoch")
    return f"{m['kind']} marker at offset {m['offset']} ({_s(m.get('time_s'))}" + (
        f", coordinator epoch {ce})" if ce is not None else ")")


def _value(v: Mapping[str, Any]) -> str:
    r = v.get("record")
    if r is None:
        return f"{v['value']}: never written (no replica holds it)"
    out = f"{v['value']}: p{r['partition']} offset {r['offset']} (sent {_s(r.get('time_s'))})"
    if v.get("late"):
        out += f", after the {_marker(v['late'])} that ended its transaction"
    m = v.get("marker")
    return out + (f", {v['status']} by the {_marker(m)}" if m else ", no marker of its producer after it")


def _ends(t: Mapping[str, Any]) -> str:
    said = []
    for e in t.get("ends") or []:
        m = e.get("marker")
        if m is None:
            said.append(f"p{e['partition']}: none")
            continue
        after = e.get("after_first_ms")
        said.append(f"p{e['partition']}: {_marker(m)}" + (
            f", {after} ms after value {t.get('first_value')}" if after is not None else ""))
    return "; ".join(said) or "none"


def _states(t: Mapping[str, Any]) -> str:
    states = t.get("states") or []
    if not states:
        return "not in the collected __transaction_state"
    where = f"__transaction_state-{states[0]['partition']}"
    said = [f"{_s(s.get('time_s'))} {s['state']}" + (f" [{','.join(s['partitions'])}]" if s["partitions"] else "")
            + (f" (epoch {s['producer_epoch']})" if s["producer_epoch"] != t.get("producer_epoch") else "")
            for s in states]
    return f"{where}: " + "; ".join(said)


def txn_story(t: Mapping[str, Any]) -> list[str]:
    """One transaction's lines: its head line (the op), then the indented facts and the cause."""
    lines = [_head(t), f"{INDENT}history: {t['line']}"]
    if t.get("producer_id") is None:
        lines.append(f"{INDENT}producer: unknown (no record of it in the segments, no state of its transactional id)")
    else:
        lines.append(f"{INDENT}producer {t['producer_id']} epoch {t['producer_epoch']}"
                     + (f" ({t['transactional_id']})" if t.get("transactional_id") else "")
                     + f", from {t['producer_source']}")
    lines += [f"{INDENT}value {_value(v)}" for v in t.get("values") or []]
    lines.append(f"{INDENT}markers of producer {t.get('producer_id')} epoch {t.get('producer_epoch')}: {_ends(t)}")
    lines.append(f"{INDENT}coordinator, {_states(t)}")
    lines += [f"{INDENT}client ({_s(c['time_s'])}): {c['text']}" for c in t.get("client_log") or []]
    lines += prefixed([t.get("cause") or "not read off the files: the facts above are all there is"],
                      f"{INDENT}cause: ")
    return lines


def txn_lines(explanation: Mapping[str, Any]) -> list[str]:
    """What `kchaos explain` prints for a txn run (see the module docstring); [] when nothing was anomalous."""
    ts = explanation.get("transactions") or []
    if not ts:
        return []
    lines = prefixed([txn_summary(explanation)], "", INDENT)
    for t in ts:
        lines += txn_story(t)
    return lines


def txn_summary(explanation: Mapping[str, Any]) -> str:
    """The summary line: how many anomalous transactions, of which kinds, grouped by cause with their ops."""
    ts = explanation.get("transactions") or []
    counts = ", ".join(f"{k} {n}" for k, n in (explanation.get("counts") or {}).items() if n)
    groups = "; ".join(f"{len(g['ops'])} {g['head']} (op{'s' if len(g['ops']) > 1 else ''} "
                       f"{', '.join(map(str, g['ops']))})" for g in explanation.get("groups") or [])
    return f"{len(ts)} anomalous transaction{'s' if len(ts) != 1 else ''} ({counts}): {groups}"


def txn_console_lines(explanation: Mapping[str, Any], limit: int = MAX_CONSOLE_GROUPS) -> list[str]:
    """What a txn run's console says about its anomalous transactions: the summary line, then "why: op N: cause"
    for the first `limit` transactions."""
    ts = explanation.get("transactions") or []
    lines = prefixed([txn_summary(explanation)], "", INDENT) if ts else []
    for t in ts[:limit]:
        lines += prefixed([f"op {t['index']}: {t.get('cause') or 'not read off the files (kchaos explain RUN)'}"],
                          "why: ")
    return lines
