"""Joining a suite's shards into one night: `kchaos merge SOURCE... --store STORE`.

Each SOURCE is a results store (or one suite night in it) where
`kchaos suite FILE --shard I/N` ran, on this machine or another. The shards
of one night are the nights of one suite with the same seed, cells, repeat
and N; merge needs each shard of it once, finished. It writes one suite night
into STORE, `STORE/suites/<suite>/<stamp of the earliest shard>/`, laid out as
a whole run of the suite leaves it: suite.yaml, suite.json (without the shard,
with `shards`: where each came from and its command line), progress.jsonl in
the whole suite's order, every run directory copied, then compare, JUnit and
the store's index, so that trends and regressions count it as one night.
Nothing is created when the shards are incomplete, mismatched, or merged
before.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from kchaos.core.store import point_latest
from kchaos.core.suite_files import STATE_FILE, Entry, latest, read_progress, record_progress
from kchaos.harness.suites.run import finish, index_night
from kchaos.harness.suites.shard import WHOLE, Shard, of_night, share
from kchaos.harness.suites.suite import Suite, SuiteError, load_suite
from kchaos.reports.suite.junit import CellOutcome


@dataclass(frozen=True)
class ShardNight:
    """One shard's suite night: its directory, its suite.json and the shard it ran."""

    path: Path
    state: dict[str, Any]
    shard: Shard

    @property
    def night(self) -> tuple[Any, ...]:
        """What the shards of one night share: suite, seed, cells, repeat and the number of shards."""
        s = self.state
        return s["name"], s["seed"], json.dumps(s["cells"], sort_keys=True), s["repeat"], self.shard.of


def shard_nights(source: Path) -> list[ShardNight]:
    """The shard nights in `source`: a suite night directory, or a store (its `suites/<suite>/<stamp>/`)."""
    if (source / STATE_FILE).is_file():
        dirs = [source]
    else:
        dirs = sorted(d for d in source.glob("suites/*/2*") if (d / STATE_FILE).is_file())
    out = []
    for d in dirs:
        state = json.loads((d / STATE_FILE).read_text(encoding="utf-8"))
        if state.get("shard"):
            out.append(ShardNight(d.resolve(), state, of_night(state)))
    return out


def _pick(sources: list[Path]) -> list[ShardNight]:
    """The shards of the one night the sources hold, in shard order; SuiteError when they hold none, parts of
    several, or not every shard once."""
    for s in sources:
        if not s.is_dir():
            raise SuiteError(f"{s}: not a directory")
    found = [n for s in sources for n in shard_nights(s)]
    if not found:
        raise SuiteError("no shard of a suite in " + ", ".join(map(str, sources))
                         + " (kchaos suite FILE --shard I/N makes them)")
    nights = {n.night for n in found}
    if len(nights) > 1:
        which = sorted({f"{name} seed {seed} in {of} shards" for name, seed, _, _, of in nights})
        raise SuiteError(f"the sources hold shards of {len(nights)} suite nights ({'; '.join(which)}): "
                         "merge one night at a time")
    of = found[0].shard.of
    by_index: dict[int, list[ShardNight]] = {}
    for n in found:
        by_index.setdefault(n.shard.index, []).append(n)
    twice = [f"{i}/{of}" for i, ns in sorted(by_index.items()) if len(ns) > 1]
    if twice:
        raise SuiteError(f"shard {', '.join(twice)} found more than once: give each shard's store once")
    missing = [f"{i}/{of}" for i in range(1, of + 1) if i not in by_index]
    if missing:
        raise SuiteError(f"shard {', '.join(missing)} of suite {found[0].state['name']} is missing from the sources")
    return [by_index[i][0] for i in range(1, of + 1)]


def _entries(suite: Suite, shards: list[ShardNight]) -> list[tuple[ShardNight, Entry]]:
    """Every repetition of the suite in its whole order, with the shard night that ran it; SuiteError when a
    shard has not finished its share."""
    ran: dict[tuple[str, int], tuple[ShardNight, Entry]] = {}
    for n in shards:
        mine = latest(read_progress(n.path))
        left = [(c.name, r) for _, c, r in share(suite, n.shard) if (c.name, r) not in mine]
        if left:
            raise SuiteError(f"shard {n.shard} in {n.path} has not finished ({len(left)} of its runs are missing): "
                             f"finish it with kchaos suite FILE --shard {n.shard} --resume")
        ran.update({key: (n, e) for key, e in mine.items()})
    return [ran[(c.name, r)] for _, c, r in share(suite, WHOLE)]


def merge_shards(sources: list[Path], store: Path, argv: list[str] | None = None,
                 console: Console | None = None) -> tuple[Suite, Path, list[CellOutcome]]:
    """Merge the shards of one suite night found in `sources` into a night of `store` (the module doc); return
    the suite, the night's directory and one outcome per cell."""
    shards = _pick(sources)
    first = shards[0]
    suite = load_suite(first.path / "suite.yaml")
    entries = _entries(suite, shards)
    started = min(n.state["started"] for n in shards)
    parent = store / "suites" / suite.name
    night = parent / started
    if night.exists():
        raise SuiteError(f"{night} exists: these shards were merged into {store} before")
    night.mkdir(parents=True)
    shutil.copy2(first.path / "suite.yaml", night / "suite.yaml")
    state = {k: v for k, v in first.state.items() if k != "shard"}
    state.update(argv=argv or [], started=started,
                 shards=[{"shard": str(n.shard), "from": str(n.path), "argv": n.state.get("argv", [])}
                         for n in shards])
    (night / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    for n, e in entries:
        if e.run and (n.path / e.run).is_dir():
            shutil.copytree(n.path / e.run, night / e.run, symlinks=True)
        record_progress(night, e)
    nights = sorted(d.name for d in parent.glob("2*") if (d / STATE_FILE).is_file())
    if nights[-1] == night.name:
        point_latest(parent, night)
    runs = sorted((night / e.run for _, e in entries if e.run and (night / e.run).is_dir()), key=lambda p: p.name)
    if runs and (not (store / "latest").exists() or (store / "latest").resolve().name < runs[-1].name):
        point_latest(store, runs[-1])
    for _, e in entries:
        index_night(store, night, e.run, console)
    index_night(store, night, None, console)
    return suite, night, finish(suite, night)
