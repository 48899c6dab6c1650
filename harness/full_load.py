"""`--rate max`: full load, with the producer pipeline picked for this machine.

`max` sends unthrottled. The options that decide how fast the producers can
go are picked from the cores this process may use (os.sched_getaffinity), unless
the user set them:

- `--client`: java, the Kafka Java client, for the queue workload when a JDK
  is on PATH and no `--producer-processes` is given: its producers are
  threads of one JVM, past the GIL and librdkafka's delivery-report path, and
  recorded 2.5 to 3.3 times the sends a second of the Python pipeline's
  (findings/benchmarks.md). Else python, and then:
- `--producer-processes`: one worker process per core, at most MAX_PROCESSES.
  Each process is one Python loop past the GIL, so cores are the ceiling.
- `--producers`: one producer instance per process (a second instance in a
  process shares its core and adds nothing).
- `--in-flight`: IN_FLIGHT sends outstanding per instance. 20,000 recorded
  5-15% more than 5,000 (docs/benchmarks.md) and stays far below librdkafka's
  queue.buffering.max.messages (100,000).
- `--linger-ms`: LINGER_MS, librdkafka's own default, so batches fill.

With the Java client no worker process is picked, and one producer instance
per core.

The picks are resolved once, when the options are read, and recorded in the
config (`workload.full_load` in test.json): a run read back from its test.json
has the same numbers, whatever machine runs it again.
"""
from __future__ import annotations

import argparse
import os
from typing import Any

MAX = "max"
IN_FLIGHT = 20_000
LINGER_MS = 5
MAX_PROCESSES = 8
PICKED = ("client", "producer_processes", "producers", "in_flight", "linger_ms")
FLAGS = {"client": "--client", "producer_processes": "--producer-processes", "producers": "--producers",
         "in_flight": "--in-flight", "linger_ms": "--linger-ms"}


def usable_cores() -> int:
    """The number of cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def pick(cores: int, explicit: dict[str, Any], java: bool = False) -> dict[str, Any]:
    """The values of PICKED for `--rate max` on a machine with `cores` cores, and why.

    `explicit` maps each of PICKED to the user's value or None; a user's value is
    kept as given. `java`: the Java client can run the producers here (the queue
    workload, and a JDK on PATH); it is picked unless the user chose a client or
    worker processes. Returns {"cores", "picked": {option: value} (every one of
    PICKED), "explicit": [options the user set], "why": one line}.
    """
    given = {k: v for k, v in explicit.items() if k in PICKED and v is not None}
    per_core = max(1, min(cores, MAX_PROCESSES))
    client = given.get("client", "java" if java and "producer_processes" not in given else "python")
    if client == "java":
        processes = given.get("producer_processes", 0)
    else:
        processes = given.get("producer_processes",
                              min(per_core, given["producers"]) if "producers" in given else per_core)
    values = {"client": client,
              "producer_processes": processes,
              "producers": given.get("producers", processes or per_core),
              "in_flight": given.get("in_flight", IN_FLIGHT),
              "linger_ms": given.get("linger_ms", LINGER_MS)}
    # A worker process is a Python producer's: with the Java client none is picked, so none is named.
    shown = [k for k in PICKED if not (k == "producer_processes" and client == "java" and k not in given)]
    chosen = [f"{FLAGS[k]} {values[k]}" for k in shown if k not in given]
    kept = [f"{FLAGS[k]} {values[k]}" for k in shown if k in given]
    why = (f"--rate max on {cores} core{'s' if cores != 1 else ''}: "
           + (", ".join(chosen) if chosen else "nothing picked")
           + (f" (yours: {', '.join(kept)})" if kept else ""))
    return {"cores": cores, "picked": values, "explicit": [k for k in PICKED if k in given], "why": why}


def help_text(java: bool) -> str:
    """What `run --help` says `--rate max` picks here, where `java` says whether a JDK is on PATH."""
    cores = usable_cores()
    here = pick(cores, {}, java=java)["why"].split(": ", 1)[1]
    return (f"max: unthrottled, with {', '.join(FLAGS[k] for k in PICKED[:-1])} and {FLAGS[PICKED[-1]]} picked "
            f"for this machine's cores unless set (here, {cores} core{'s' if cores != 1 else ''}, for the queue "
            f"workload: {here}); the start-of-run line and test.json say what was picked")


def parse_rate(text: str) -> float | str:
    """`--rate`'s value: a number of sends per second, or "max"; otherwise an argparse error (one line, exit 3).
    Whether the number is positive is checked with the other options."""
    if text.strip().lower() == MAX:
        return MAX
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of sends per second or max, got {text!r}") from None
