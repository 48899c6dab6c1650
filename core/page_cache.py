"""The page-cache model of a run: when lazyfs writes unsynced data back to disk, and so what a power
failure can take.

Linux writes a file's dirty pages back once the oldest is `vm.dirty_expire_centisecs` old (30 s by
default), when its flusher wakes, every `vm.dirty_writeback_centisecs` (5 s by default; 0 turns the
periodic writeback off). kchaos emulates that by default (model `kernel`), with both values read from
each node. `never-written-back` is the worst case: nothing reaches the disk unless Kafka fsyncs it, so
a power failure loses every unsynced write since the start of the run. `--writeback-age A` sets the
expiry by hand (A = 0 is the worst case).

The chosen model is recorded in test.json under `page_cache` (`record`), and every report states it in
one line (`describe`). Pure functions over the configuration and that record: core, no I/O.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KERNEL = "kernel"
NEVER = "never-written-back"
MODELS = (KERNEL, NEVER)
"""The values of `--page-cache`."""

VM_FILES = ("/proc/sys/vm/dirty_expire_centisecs", "/proc/sys/vm/dirty_writeback_centisecs")
"""Where a Linux node keeps its writeback age and flusher interval, in hundredths of a second."""

LINUX_DEFAULTS = (3000, 500)
"""Linux's own defaults for the two, used when a node's cannot be read."""


@dataclass(frozen=True)
class Writeback:
    """What one node's lazyfs does with unsynced data: written back once `age_s` old, the flusher
    waking every `interval_s`; `age_s` None means never. `source` says where the numbers came from."""

    model: str  # KERNEL, NEVER, or "writeback-age" (set by hand)
    age_s: float | None
    interval_s: float | None
    source: str

    def env(self) -> dict[str, str]:
        """The node scripts' environment for it (kafka-ctl passes it to lazyfs); empty for never."""
        if self.age_s is None:
            return {}
        env = {"KCHAOS_WRITEBACK_AGE": f"{self.age_s:g}"}
        if self.interval_s:
            env["KCHAOS_WRITEBACK_INTERVAL"] = f"{self.interval_s:g}"
        return env

    def to_dict(self) -> dict[str, Any]:
        """The node's entry of test.json's `page_cache.nodes`."""
        return {"model": self.model, "age_s": self.age_s, "interval_s": self.interval_s, "source": self.source}


def parse_vm(text: str) -> tuple[int, int] | None:
    """The two centisecond values from the output of `cat VM_FILES...`; None unless both are integers."""
    parts = text.split()
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


def plan(page_cache: str, writeback_age_s: float | None, vm: tuple[int, int] | None) -> Writeback:
    """The writeback one node gets from `--page-cache`, `--writeback-age` (None: not given) and the node's
    (expire, writeback) centiseconds (None: unreadable, so Linux's defaults)."""
    expire_cs, every_cs = vm or LINUX_DEFAULTS
    source = "the node's vm.dirty_expire_centisecs and vm.dirty_writeback_centisecs" if vm else \
        "Linux's defaults (the node's /proc/sys/vm could not be read)"
    if page_cache == NEVER or writeback_age_s == 0:
        return Writeback(NEVER, None, None, "--page-cache never-written-back" if page_cache == NEVER
                         else "--writeback-age 0")
    if writeback_age_s is not None:
        return Writeback("writeback-age", writeback_age_s, every_cs / 100 or None,
                         f"--writeback-age {writeback_age_s:g}")
    if every_cs == 0:  # the kernel's periodic writeback is off: dirty data waits for memory pressure or sync
        return Writeback(KERNEL, None, None, source + " (periodic writeback off)")
    return Writeback(KERNEL, expire_cs / 100, every_cs / 100, source)


def record(by_node: Mapping[str, Writeback], storage: str) -> dict[str, Any]:
    """test.json's `page_cache`: the model as emulated, on each node."""
    models = {w.model for w in by_node.values()}
    model = None if not models else models.pop() if len(models) == 1 else "mixed"  # None: no lazyfs
    return {"model": model, "storage": storage,
            "nodes": {n: w.to_dict() for n, w in sorted(by_node.items())}}


def _secs(x: float) -> str:
    return f"{x:g} s"


def describe(test: Mapping[str, Any]) -> str:
    """One line for the reports: the page-cache model the run used, from its test.json (`page_cache`, or
    for a run made before it was recorded, the configuration: such runs never wrote back by default)."""
    rec = test.get("page_cache")
    cluster = test.get("cluster") or {}
    storage = (rec or {}).get("storage") or cluster.get("storage")
    if storage != "lazyfs":
        return "page cache: the node's own (no lazyfs: power cannot fail in this run)"
    if not isinstance(rec, dict) or not rec.get("nodes"):
        age = cluster.get("writeback_age_s") or 0
        return (f"page cache: written back after {_secs(age)} (--writeback-age {age:g})" if age else
                "page cache: never written back, the worst case (a power failure loses every unsynced write)")
    kinds = {(w.get("model"), w.get("age_s"), w.get("interval_s")) for w in rec["nodes"].values()}
    if len(kinds) > 1:
        return "page cache: differs by node: " + "; ".join(
            f"{n} {_one(w)}" for n, w in rec["nodes"].items())
    w = next(iter(rec["nodes"].values()))
    return "page cache: " + _one(w)


def _one(w: Mapping[str, Any]) -> str:
    model, age, every = w.get("model"), w.get("age_s"), w.get("interval_s")
    if age is None:
        if model == KERNEL:
            return "as the nodes' kernel keeps it: periodic writeback off, so never written back"
        return "never written back, the worst case (a power failure loses every unsynced write)"
    flusher = f", the flusher waking every {_secs(every)}" if every else ""
    if model == KERNEL:
        return f"as Linux keeps it: written back once {_secs(age)} old{flusher} (the nodes' vm.dirty_* settings)"
    return f"written back once {_secs(age)} old{flusher} (--writeback-age {age:g})"


def short(test: Mapping[str, Any]) -> str | None:
    """The model in a few words for a table's cell (`kernel 30 s/5 s`, `never written back`), None without lazyfs."""
    line = describe(test)
    if "no lazyfs" in line:
        return None
    nodes = ((test.get("page_cache") or {}).get("nodes") or {}).values()
    kinds = {(w.get("model"), w.get("age_s"), w.get("interval_s")) for w in nodes}
    if len(kinds) > 1:
        return "differs by node"
    if not kinds:  # made before the model was recorded
        age = (test.get("cluster") or {}).get("writeback_age_s") or 0
        return f"writeback-age {age:g} s" if age else "never written back"
    model, age, every = kinds.pop()
    if age is None:
        return "never written back"
    return f"{'kernel' if model == KERNEL else 'writeback-age'} {age:g} s" + (f"/{every:g} s" if every else "")
