"""Benchmark: how often each scenario's prediction held, over every repetition recorded, as a Markdown table.

    python bench/scenario_rates.py [DIR ...] [--ledger FILE | --no-ledger] [--record] [--since DATE] [--until DATE]

A campaign runs `kchaos scenario NAME --variant V --seed S` once per
repetition (so other work can use the one cluster in between), which leaves
one scenario directory per repetition. This reads the scenario.json of every
scenario directory given (a scenario directory, a `scenarios/NAME` folder,
or a results store; default: results/scenarios/*/*), turns each variant's
repetitions into ledger entries, adds those already in the ledger
(bench/data/scenario-rates.jsonl: one JSON line per repetition, committed,
so a campaign spanning sessions whose run directories are gone accumulates)
and prints, per scenario, variant and prediction: matched k of n with its
95% Wilson interval, the metrics the prediction names and acked (median and range), the Kafka versions,
the dates and the repetitions' total wall time. `--record` appends the
repetitions the ledger does not hold yet. A repetition that errored is a
ledger line with matched null: it is counted apart, not in k or n.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kchaos.core.exit_codes import EXIT_BAD_INPUT
from kchaos.core.kafka_versions import DEFAULT as DEFAULT_KAFKA
from kchaos.harness.scenarios.stats import Rate, spreads

REPO = Path(__file__).resolve().parents[1]
LEDGER = REPO / "bench" / "data" / "scenario-rates.jsonl"
_STAMP = re.compile(r"(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)(?:\.\d+)?Z")


class RatesError(ValueError):
    """A directory or ledger that cannot be read: one line naming it (exit code 3)."""


@dataclass(frozen=True)
class Rep:
    """One repetition of a scenario variant, as a ledger line; `matched` is None when it errored."""

    id: str  # scenario/<scenario stamp>/<run>, unique per repetition: the ledger's key
    date: str  # when the run started, UTC, ISO 8601
    scenario: str
    variant: str
    predict: str
    seed: int | None
    kafka: str | None
    matched: bool | None
    seconds: float | None  # the repetition's wall time, cluster start and check included
    metrics: dict[str, float] = field(default_factory=dict)
    config: str | None = None  # hash of the variant's run options (its schedule by content)
    error: str | None = None

    @property
    def key(self) -> tuple[str, str, str, str | None]:
        """What repetitions must share to be counted together."""
        return self.scenario, self.variant, self.predict, self.config


def iso(stamp: str) -> str | None:
    """`20261123T083045.406Z` as `2026-11-23T08:30:45Z`; None if it is not a store stamp."""
    m = _STAMP.fullmatch(stamp)
    return f"{m[1]}-{m[2]}-{m[3]}T{m[4]}:{m[5]}:{m[6]}Z" if m else None


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _config(options: dict[str, Any] | None, test: dict[str, Any] | None = None) -> str | None:
    """A hash of the variant's run options. A run whose page cache was written back as the node's kernel does
    (the default since 2026-11-25; test.json's `page_cache`) hashes that too: before, the default never wrote
    back, so the same options made another experiment. `kafka_version` set to the default release is the same
    experiment as not set (a scenario pins it so that `--versions` does not run it on other lines)."""
    if options is None:
        return None
    opts = dict(options)
    if opts.get("kafka_version") == DEFAULT_KAFKA:
        del opts["kafka_version"]
    if ((test or {}).get("page_cache") or {}).get("model") not in (None, "never-written-back", "writeback-age"):
        opts["page_cache_model"] = test["page_cache"]["model"]
    if isinstance(opts.get("schedule"), str):  # a content-addressed cache file: its name is its content
        opts["schedule"] = Path(opts["schedule"]).name
    return hashlib.sha256(json.dumps(opts, sort_keys=True).encode()).hexdigest()[:10]


def from_scenario_dir(sdir: Path) -> list[Rep]:
    """The repetitions recorded in one scenario directory's scenario.json (old or new layout); RatesError if
    it has none. Wall seconds, seeds of errors and Kafka versions missing from an older scenario.json are
    read from progress.jsonl and the runs' test.json."""
    sdir = sdir.resolve()
    state = _json(sdir / "scenario.json")
    if not isinstance(state, dict) or not isinstance(state.get("variants"), list):
        raise RatesError(f"{sdir}: no readable scenario.json (the scenario is still running, or was interrupted)")
    name = state.get("scenario") or sdir.parent.name
    progress: dict[tuple[str, int], dict[str, Any]] = {}
    for line in (_text(sdir / "progress.jsonl") or "").splitlines():
        try:
            e = json.loads(line)
            progress[(e["cell"], e["rep"])] = e  # the last line of a (cell, rep) wins, as in harness.suite_run
        except (ValueError, KeyError, TypeError):
            continue
    suite = _json(sdir / "suite.json") or {}
    options = {c.get("name"): c.get("options") for c in suite.get("cells") or [] if isinstance(c, dict)}
    started = iso(sdir.name) or iso(str(suite.get("started", ""))) or ""
    out = []
    for v in state["variants"]:
        vname, predict, config = v["name"], v["predict"], _config(options.get(v["name"]))
        for r in v.get("runs") or []:
            run = sdir / r["run"]
            test = _json(run / "test.json") or {}
            config = _config(options.get(vname), test)
            out.append(Rep(f"{name}/{sdir.name}/{r['run']}", iso(run.name) or started, name, vname, predict,
                           r.get("seed"), r.get("kafka") or (test.get("versions") or {}).get("kafka"),
                           bool(r["matched"]), r.get("seconds", progress.get((vname, r["rep"]), {}).get("seconds")),
                           dict(r["metrics"]), config))
        for e in _errored(v, vname, progress):
            where = e.get("run") or f"{vname}/rep{e['rep']}"
            out.append(Rep(f"{name}/{sdir.name}/{where}", (iso(Path(e["run"]).name) if e.get("run") else None)
                           or started, name, vname, predict, e.get("seed"), None, None, e.get("seconds"), {},
                           config, e.get("error") or "error"))
    return out


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def _errored(v: dict[str, Any], vname: str, progress: dict[tuple[str, int], dict[str, Any]]) -> list[dict]:
    if isinstance(v.get("errored_runs"), list):
        return v["errored_runs"]
    out = []  # an older scenario.json: only "rep N: message" strings, the rest is in progress.jsonl
    for text in v.get("errors") or []:
        m = re.match(r"rep (\d+): (.*)", text, re.S)
        if m:
            rep = int(m[1]) - 1
            p = progress.get((vname, rep), {})
            out.append({"rep": rep, "seed": p.get("seed"), "run": p.get("run"), "error": m[2],
                        "seconds": p.get("seconds")})
    return out


def find_scenario_dirs(paths: Iterable[Path]) -> list[Path]:
    """Scenario directories in `paths`: each is one, or a folder of them, or a store; RatesError if one does
    not exist. Unfinished directories (no scenario.json yet) are left out; `latest` links count once."""
    found: dict[Path, None] = {}
    for p in paths:
        if not p.is_dir():
            raise RatesError(f"{p}: no such directory")
        for pattern in ("scenario.json", "*/scenario.json", "*/*/scenario.json", "scenarios/*/*/scenario.json"):
            for f in sorted(p.glob(pattern)):
                found.setdefault(f.parent.resolve())
    return list(found)


def read_ledger(path: Path) -> list[Rep]:
    """The repetitions in a ledger file (none if it does not exist); RatesError naming file:line if a line
    is not a repetition."""
    text = _text(path)
    if text is None:
        return []
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(Rep(**json.loads(line)))
        except (ValueError, TypeError) as e:
            raise RatesError(f"{path}:{i}: not a ledger line ({e})") from None
    return out


def record(path: Path, reps: list[Rep]) -> list[Rep]:
    """Append to the ledger at `path` the repetitions it does not hold yet (by id); return those."""
    known = {r.id for r in read_ledger(path)}
    new = [r for r in merge(reps) if r.id not in known]
    if new:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            for r in new:
                fh.write(json.dumps(asdict(r), sort_keys=True) + "\n")
    return new


def merge(*sources: Iterable[Rep]) -> list[Rep]:
    """Every repetition once (the first of each id), oldest first."""
    seen: dict[str, Rep] = {}
    for src in sources:
        for r in src:
            seen.setdefault(r.id, r)
    return sorted(seen.values(), key=lambda r: (r.date, r.id))


def group(reps: Iterable[Rep], order: dict[str, list[str]] | None = None) -> dict[tuple, list[Rep]]:
    """Repetitions by (scenario, variant, prediction, config); scenarios by name, variants in `order`
    (a scenario's variant names, as in its file) then by first appearance."""
    groups: dict[tuple, list[Rep]] = {}
    for r in sorted(reps, key=lambda r: (r.date, r.id)):
        groups.setdefault(r.key, []).append(r)
    order = order or {}

    def rank(key: tuple) -> tuple:
        names = order.get(key[0], [])
        first = groups[key][0].date
        return key[0], names.index(key[1]) if key[1] in names else len(names), first
    return {k: groups[k] for k in sorted(groups, key=rank)}


def file_order(scenario_dir: Path = REPO / "scenarios") -> dict[str, list[str]]:
    """Each shipped scenario's variant names in file order (read as plain YAML, nothing is preflighted)."""
    import yaml

    out = {}
    for f in sorted(scenario_dir.glob("*.yaml")):
        try:
            doc = yaml.safe_load(f.read_text(encoding="utf-8")) or {}
            out[str(doc.get("name") or f.stem)] = [str(v.get("name")) for v in doc.get("variants") or []
                                                   if isinstance(v, dict)] or [str(doc.get("name") or f.stem)]
        except (OSError, yaml.YAMLError, AttributeError):
            continue
    return out


def rate_of(reps: list[Rep]) -> Rate:
    """Matched of the checked repetitions, errored ones apart."""
    checked = [r for r in reps if r.matched is not None]
    return Rate(sum(bool(r.matched) for r in checked), len(checked), len(reps) - len(checked))


def _hours(seconds: float) -> str:
    m = round(seconds / 60)
    return f"{m // 60} h {m % 60:02d} min" if m >= 60 else f"{seconds / 60:.1f} min"


def _dates(reps: list[Rep]) -> str:
    days = sorted({r.date[:10] for r in reps if r.date})
    return "-" if not days else days[0] if len(days) == 1 else f"{days[0]} – {days[-1]}"


def row_name(scenario: str, variant: str) -> str:
    """A table row's name: the scenario, and the variant after a dot unless it is named as the scenario."""
    return scenario if variant == scenario else f"{scenario} · {variant}"


def predicted_names(predict: str) -> list[str]:
    """The metrics a prediction names, in its order (`G1a + torn_transaction > 0` -> G1a, torn_transaction)."""
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", predict)
    return list(dict.fromkeys(w for w in words if w not in ("and", "or", "not", "True", "False")))


def table(groups: dict[tuple, list[Rep]]) -> str:
    """The Markdown table: a row per (scenario, variant, prediction, config), and a total line under it."""
    split = {}
    for k in groups:
        split[k[:2]] = split.get(k[:2], 0) + 1
    lines = ["| scenario · variant | prediction | Kafka | matched | rate (95% CI) | predicted, median (range) "
             "| acked, median (range) | dates | wall |",
             "|---|---|---|---:|---|---:|---:|---|---:|"]
    total = 0.0
    for k, reps in groups.items():
        scenario, variant, predict, config = k
        name = row_name(scenario, variant)
        if split[k[:2]] > 1:
            name += f" (config {config})"
        names = predicted_names(predict)
        sp = spreads([r.metrics for r in reps if r.matched is not None], (*names, "acked"))
        shown = [n for n in names if n in sp]
        observed = (sp[shown[0]].text() if len(shown) == 1
                    else " · ".join(f"{n} {sp[n].text()}" for n in shown) or "-")
        wall = sum(r.seconds or 0.0 for r in reps)
        total += wall
        rate = rate_of(reps)
        kafka = ", ".join(sorted({r.kafka for r in reps if r.kafka})) or "-"
        lines.append(f"| {name} | `{predict}` | {kafka} | {rate.fraction()} | {rate.interval()} | "
                     f"{observed} | {sp['acked'].text() if 'acked' in sp else '-'}"
                     f" | {_dates(reps)} | {_hours(wall)} |")
    n = sum(len(v) for v in groups.values())
    lines.append("")
    lines.append(f"{n} repetitions of {len(groups)} variants, {_hours(total)} of runs in all. Errored repetitions "
                 f"are counted apart (+N errored), not in k/n.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the rates table; with --record, append the new repetitions to the ledger first."""
    ap = argparse.ArgumentParser(prog="bench/scenario_rates.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*", type=Path, help="scenario directories or folders of them "
                                                       "(default: results/scenarios)")
    ap.add_argument("--ledger", type=Path, default=LEDGER, help=f"ledger file (default {LEDGER.relative_to(REPO)})")
    ap.add_argument("--no-ledger", action="store_true", help="count only the directories, not the ledger")
    ap.add_argument("--record", action="store_true", help="append the directories' new repetitions to the ledger")
    ap.add_argument("--since", metavar="YYYY-MM-DD", help="only repetitions from this date on (e.g. 2026-11-25, when "
                                                         "the page cache began to be written back as Linux does)")
    ap.add_argument("--until", metavar="YYYY-MM-DD", help="only repetitions before this date")
    args = ap.parse_args(argv)
    try:
        if args.record and args.no_ledger:
            raise RatesError("--record appends to the ledger; drop --no-ledger")
        default = REPO / "results" / "scenarios"
        dirs = args.dirs or ([default] if default.is_dir() else [])
        found = [r for d in find_scenario_dirs(dirs) for r in from_scenario_dir(d)]
        ledger = [] if args.no_ledger else read_ledger(args.ledger)
    except RatesError as e:
        print(f"scenario_rates: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.record:
        new = record(args.ledger, found)
        print(f"recorded {len(new)} new repetition(s) in {args.ledger} "
              f"({len(found) - len(new)} of {len(found)} found were there already)", file=sys.stderr)
    reps = [r for r in merge(ledger, found)
            if (not args.since or r.date[:10] >= args.since) and (not args.until or r.date[:10] < args.until)]
    if not reps:
        print("scenario_rates: no finished scenario repetitions found", file=sys.stderr)
        return 1
    print(table(group(reps, file_order())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
