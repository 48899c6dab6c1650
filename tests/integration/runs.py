"""One `kchaos run` through the command line, as a user types it, with its results."""
import json
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kchaos.core.faults import read_faults

KCHAOS = [sys.executable, "-m", "kchaos"]
KAFKA_INTERNAL = "Kafka reported "  # checkers/kafka_errors.py internal_reasons: each reason starts so
# Kafka 3.7.2's transaction coordinator can throw inside a metadata publish, and the broker then never takes up the
# leaderships after that point in the delta (findings/txn-coordinator-publishing-fault.md): a partition is left with
# no working leader until the end, so the cluster does not recover and the final read of that partition cannot end.
PUBLISHING_FAULT = "Encountered metadata publishing fault"
STUCK_LEADER = ("the cluster did not recover after the heal", "could not be looked for")


def finished_run(store: Path, name: str, options: list[str], timeout: float = 900) -> tuple[Path, dict[str, Any]]:
    """Run `kchaos run --store STORE --name NAME OPTIONS`; assert that it held (`held`: exit 0, or exit 2 with
    Kafka's internal faults as the only reasons, which a warning names), else show what failed, what was
    undecided and the end of its stderr; return the run directory and its results.json."""
    proc = subprocess.run([*KCHAOS, "run", "--store", str(store), "--name", name, *options],
                          capture_output=True, text=True, timeout=timeout)
    run = (Path(store) / "latest").resolve()
    assert (run / "results.json").is_file(), (proc.returncode, "no results.json", proc.stderr[-3000:])
    results = json.loads((run / "results.json").read_text())
    if proc.returncode == 2 and stuck_by_kafka(results):
        pytest.xfail("Kafka's metadata publishing fault left a partition without a working leader "
                     "(findings/txn-coordinator-publishing-fault.md); the run is unknown, rightly: "
                     + "; ".join(results["undecided"]))
    assert proc.returncode == {"pass": 0, "unknown": 2}.get(results.get("verdict")) and held(results), \
        (proc.returncode, results.get("failed"), results.get("undecided"), proc.stderr[-3000:])
    if results["verdict"] != "pass":  # so that CI's log shows Kafka's faults
        warnings.warn("unknown: " + "; ".join(results["undecided"]), KafkaFaultWarning, stacklevel=2)
    return run, results


def held(results: dict[str, Any]) -> bool:
    """The run passed; or it is unknown only because Kafka logged internal faults in its own logs (the verdict's
    reasons say which), which is Kafka's finding and not what these tests are about: every check of the history
    still applies (`finished_run` warns, naming the faults)."""
    undecided = results.get("undecided") or []
    faults_only = bool(undecided) and all(u.startswith(KAFKA_INTERNAL) for u in undecided)
    return results.get("verdict") == "pass" or (results.get("verdict") == "unknown" and faults_only)


def stuck_by_kafka(results: dict[str, Any]) -> bool:
    """The run is unknown, a broker logged Kafka's metadata publishing fault, and every other reason is Kafka's
    internal faults or what a partition left without a working leader causes: no recovery after the heal and
    writes whose partition's final read could not end. Nothing failed. Such a run cannot answer what an
    integration test asks of the history, so the test is marked xfail with the reasons rather than passed."""
    undecided = results.get("undecided") or []
    return (results.get("verdict") == "unknown" and not results.get("failed")
            and any(u.startswith(KAFKA_INTERNAL) and PUBLISHING_FAULT in u for u in undecided)
            and all(u.startswith(KAFKA_INTERNAL) or any(s in u for s in STUCK_LEADER) for u in undecided))


class KafkaFaultWarning(UserWarning):
    """Kafka logged an internal fault during an integration run (checkers/kafka_errors.py)."""


def assert_a_copier_crashed_and_was_replaced(ops: list[dict[str, Any]]) -> None:
    """crash-client crashed a copier mid-transaction, and a new copier with its transactional.id started (its
    init fencing the crashed producer)."""
    assert any(o["process"] == "nemesis" and o["f"] == "crash" and o["type"] == "ok" for o in ops), \
        "crash-client never crashed a copier"
    assert any(o["f"] == "init" and o["type"] == "ok" and o["after_crash"] for o in ops), \
        "no copier was replaced (a new producer fencing the crashed one)"
    assert any(o["f"] == "copy" and o["type"] == "fail" and "crashed" in o.get("error", "") for o in ops), \
        "no copier crashed mid-transaction"


# What a run exercised, read from its history rather than counted: a loaded machine does less work in the same
# seconds, so a floor on how much was done fails there for no fault of Kafka's. Whether work was done at each
# stage of the faults, and whether a fault struck while work was in flight, does not depend on the speed.

def is_ack(op: dict[str, Any]) -> bool:
    """An acknowledged write."""
    return op["f"] == "send" and op["type"] == "ok"


def is_commit(op: dict[str, Any]) -> bool:
    """A committed transaction."""
    return op["f"] == "txn" and op["type"] == "ok"


def fault_span(ops: list[dict[str, Any]]) -> tuple[int, int]:
    """When the nemesis's schedule began (its first op's invocation) and was over (its last op's completion), on the
    history's clock. The end-of-run `heal` is no part of it: the clients run on after it only until the cluster
    has recovered, which may be at once, so nothing need happen after it."""
    played = [o for o in ops if o["process"] == "nemesis" and o["f"] != "heal"]
    assert any(o["type"] != "invoke" for o in played), "the nemesis played no op"
    return (min(o["time"] for o in played if o["type"] == "invoke"),
            max(o["time"] for o in played if o["type"] != "invoke"))


def assert_done_around_the_faults(ops: list[dict[str, Any]], done: Callable[[dict[str, Any]], bool], what: str,
                                  during: bool = False) -> None:
    """Some client op `done` accepts completed before the first fault was invoked and some after the nemesis's
    last op completed; with `during`, some also in between. A run that did nothing after the faults (the cluster
    or the client never recovered) fails, however fast or slow the machine."""
    first, last = fault_span(ops)
    times = [o["time"] for o in ops if o["process"] != "nemesis" and done(o)]
    assert any(t < first for t in times), f"no {what} before the first fault ({first / 1e9:.1f} s)"
    if during:
        assert any(first < t < last for t in times), \
            f"no {what} while the faults were played ({first / 1e9:.1f} s to {last / 1e9:.1f} s)"
    assert any(t > last for t in times), f"no {what} after the nemesis's last op ({last / 1e9:.1f} s)"


def assert_each_fault_struck_ops_in_flight(ops: list[dict[str, Any]], fault: str, client_f: str) -> None:
    """Every `fault` the nemesis applied (ok) came while a client `client_f` op was outstanding: one invoked
    before the fault completed and not completed before the fault was invoked."""
    outstanding: dict[tuple[Any, str], int] = {}  # a process has one op of a kind outstanding at a time
    spans: list[tuple[int, float]] = []
    for o in ops:
        if o["process"] == "nemesis" or o["f"] != client_f:
            continue
        key = (o["process"], o["f"])
        if o["type"] == "invoke":
            outstanding[key] = o["time"]
        elif key in outstanding:
            spans.append((outstanding.pop(key), o["time"]))
    spans += [(t, float("inf")) for t in outstanding.values()]  # cut off by the end of the run
    invoked: dict[str, int] = {}
    struck = 0
    for o in ops:
        if o["process"] != "nemesis" or o["f"] != fault:
            continue
        if o["type"] == "invoke":
            invoked[o.get("nemesis")] = o["time"]
        elif o["type"] == "ok":
            start, end = invoked[o.get("nemesis")], o["time"]
            assert any(a < end and b > start for a, b in spans), \
                f"{fault} at {start / 1e9:.1f} s met no {client_f} in flight"
            struck += 1
    assert struck, f"the nemesis applied no {fault}"


def fault_windows(run: Path, ops: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(from, to) of each fault the nemesis applied: its break op's invocation to the completion of the next mend
    op (or `heal`) of the same nemesis, as the run's faults.json says which op breaks and which mends; a one-shot
    fault (nothing mends it) spans its own op."""
    catalogue = read_faults(run, ops)
    invoked: dict[str, int] = {}
    open_: dict[str, list[int]] = {}
    windows: list[tuple[int, int]] = []
    for o in ops:
        if o["process"] != "nemesis":
            continue
        spec, role = o.get("nemesis"), catalogue.role(o.get("nemesis"), o["f"])
        if role == "break" and o["type"] == "invoke":
            invoked[spec] = o["time"]
        elif role == "break" and o["type"] == "ok" and catalogue.get(spec).mends is None:
            windows.append((invoked[spec], o["time"]))
        elif role == "break" and o["type"] == "ok":
            open_.setdefault(spec, []).append(invoked[spec])
        elif (role == "mend" or o["f"] == "heal") and o["type"] != "invoke":
            windows += [(start, o["time"]) for start in open_.pop(spec, [])]
    return sorted(windows)


def assert_writes_acked_around_every_kill(ops: list[dict[str, Any]]) -> None:
    """The spine's exercise (acks=all, min.insync=2, partition leaders killed): writes acknowledged before the
    first kill, while the kills went on and after the last restart, and every kill struck with writes in flight,
    so that "every acknowledged write was read back" covers writes on each side of a failover."""
    assert_done_around_the_faults(ops, is_ack, "acknowledged write", during=True)
    assert_each_fault_struck_ops_in_flight(ops, "kill", "send")
