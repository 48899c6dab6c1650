"""Scenario files: a known data-loss experiment with its predicted outcome, as a small suite.

    name: unclean-election
    description: one line
    mechanism: why the prediction holds (prose, shown by --list and in docs/scenarios.md)
    prevents: the configuration that prevents the loss
    seed: 6                         # default seed of every run (kchaos scenario --seed overrides)
    repeat: 1                       # default repetitions (kchaos scenario --repeat overrides)
    base: {acks: all, min_insync: 1, partitions: 1, time_limit: 40}      # kchaos run options
    schedule:                       # a fault schedule (schedule.json entries), replayed as given
      - {at: 3, nemesis: slow-follower, op: {f: start-slow, target: followers, partition: 0}}
    predict: lost > 0               # decided on the run's observed metrics
    versions: ["3.7", "3.9", "4.4"] # the Kafka lines it is measured on (kchaos scenario --versions listed)
    variants:                       # optional: the same experiment under other settings
      - {name: clean, options: {unclean: false}, predict: lost == 0 and unavailable_s > 5}
      - {name: config-only, predict: lost == 0, predict_since: {"3.9": lost > 0}}

A variant may override `options` (over base), `schedule` and `predict`;
without variants the scenario is one variant named after itself. A
prediction is a Python-like expression over the metric names (comparisons,
`and`, `or`, `not`, arithmetic, numbers) and is checked when the file loads,
as is every variant's configuration and schedule (as `kchaos run` would).

Versions: `Scenario.on_versions` runs each variant on each Kafka line given.
On the version it runs anyway (its options' or the default) a variant keeps
its name and configuration, so its repetitions count with those already
made; on another line it is `NAME-kafka-LINE`, with `kafka_version` set to
the line's latest release. `predict_since` gives the prediction from a line
on, where Kafka's behaviour changed (KRaft honours unclean election from
3.9). A variant whose own options set `kafka_version` runs there only.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kchaos.core.cache import cache_dir
from kchaos.core.config import ConfigError
from kchaos.core.kafka_versions import DEFAULT as KAFKA_DEFAULT
from kchaos.core.kafka_versions import (
    LINE_NAMES,
    UnsupportedVersion,
    line_of,
    on_line_name,
    resolve_version,
    split_on_line,
)
from kchaos.core.suggest import did_you_mean
from kchaos.core.workload_kind import kind_of
from kchaos.core.yaml_doc import SpecDoc
from kchaos.harness.scenarios.prediction import Prediction
from kchaos.harness.suites.spec_files import Cell, check_cell, head, preflight, run_options
from kchaos.harness.suites.suite import Suite, SuiteError

SCENARIO_DIR = Path(__file__).resolve().parents[2] / "scenarios"
TOP_KEYS = ("name", "description", "mechanism", "prevents", "seed", "repeat", "base", "schedule", "predict",
            "versions", "variants")
VARIANT_KEYS = ("name", "description", "options", "schedule", "predict", "predict_since")


class ScenarioError(SuiteError):
    """A bad scenario file or name: one line naming the file, line and key (exit code 3)."""


@dataclass(frozen=True)
class Variant:
    """One experiment of a scenario: its suite cell, the schedule it replays (or none) and its prediction;
    `since` the predictions from a Kafka line on (oldest line first), `pinned` when its own options choose the
    Kafka version, `base` the name of the variant it was made from by `Scenario.on_versions` (else its own)."""

    name: str
    description: str
    cell: Cell
    schedule: tuple[dict[str, Any], ...] | None
    predict: Prediction
    since: tuple[tuple[str, Prediction], ...] = ()
    pinned: bool = False
    base: str = ""

    @property
    def version(self) -> str:
        """The Kafka release the variant runs."""
        return str(dict(self.cell.options).get("kafka_version") or KAFKA_DEFAULT)

    def prediction_on(self, line: str) -> Prediction:
        """The prediction for Kafka `line`: the newest `since` entry at or before it, else `predict`."""
        out = self.predict
        for since, pred in self.since:
            if LINE_NAMES.index(since) <= LINE_NAMES.index(line):
                out = pred
        return out

    def on_line(self, line: str, index: int) -> Variant:
        """This variant on Kafka `line` (its latest release): itself when it runs that line anyway, else
        NAME-kafka-LINE with that release, the features its workload needs turned on there, and the line's
        prediction; ScenarioError when the options do not hold on that line."""
        own = line_of(self.version).line
        if line == own:
            return replace(self, cell=replace(self.cell, index=index), predict=self.prediction_on(line),
                           base=self.base or self.name)
        name = on_line_name(self.name, line)
        release = resolve_version(line)
        options = {**dict(self.cell.options), "kafka_version": release}
        features = kind_of(options.get("workload")).features(line_of(release))
        if features:  # what the workload needs turned on where the line has it in preview
            have = options.get("kafka_feature") or []
            have = [have] if isinstance(have, str) else list(have)
            options["kafka_feature"] = have + [f for f in features if f not in have]
        params = ((("variant", name),) + tuple((k, v) for k, v in self.cell.params if k not in ("variant",
                                                                                                "kafka_version"))
                  + (("kafka_version", release),))
        cell = Cell(index, name, params, tuple(options.items()))
        try:
            check_cell(cell)
        except ConfigError as e:
            raise ScenarioError(f"variant {self.name} on Kafka {line}: {e}") from None
        return replace(self, name=name, cell=cell, predict=self.prediction_on(line), base=self.base or self.name)


@dataclass(frozen=True)
class Scenario:
    """A parsed, validated scenario file."""

    name: str
    description: str
    mechanism: str
    prevents: str
    path: Path
    text: str
    seed: int
    repeat: int
    variants: tuple[Variant, ...]
    versions: tuple[str, ...] = ()

    def on_versions(self, versions: tuple[str, ...]) -> Scenario:
        """The scenario with every variant run on each Kafka line of `versions` (line names or releases, as
        --kafka-version takes them; a release stands for its line), in that order; a pinned variant only on its
        own line, if listed. ScenarioError for a version kchaos cannot run or a variant that cannot run on it."""
        lines = []
        for text in versions:
            try:
                lines.append(line_of(resolve_version(text)).line)
            except UnsupportedVersion as e:
                raise ScenarioError(str(e).replace("--kafka-version", "--versions", 1)) from None
        out: list[Variant] = []
        for v in self.variants:
            for line in dict.fromkeys(lines):
                if v.pinned and line != line_of(v.version).line:
                    continue
                out.append(v.on_line(line, len(out)))
        if not out:
            raise ScenarioError(f"scenario {self.name}: no variant runs on {', '.join(lines)} (each variant here "
                                "sets its own kafka_version)")
        return replace(self, variants=tuple(out))

    def select(self, names: tuple[str, ...], versions: tuple[str, ...] = ()) -> tuple[Scenario, tuple[str, ...]]:
        """The scenario on `versions` ("listed": the file's `versions`) and the variant names of it that `names`
        asks for: a variant's own name (each of its lines), or NAME-kafka-LINE, which also runs LINE. ScenarioError
        naming an unknown variant or version."""
        if versions == ("listed",):
            versions = self.versions or (line_of(self.variants[0].version).line,)
        wanted = list(versions)
        for n in names:
            line = split_on_line(n)[1]
            if line and n not in {v.name for v in self.variants} and line not in wanted:
                wanted.append(line)
        sc = self.on_versions(tuple(wanted)) if wanted else self
        known = {v.name for v in sc.variants} | {v.base for v in sc.variants}
        unknown = [n for n in names if n not in known]
        if unknown:
            shown = [v.name for v in sc.variants]
            raise ScenarioError(f"--variant {','.join(unknown)}{did_you_mean(unknown[0], shown)}: scenario "
                                f"{self.name} has {', '.join(shown)}")
        return sc, tuple(v.name for v in sc.variants if v.name in names or v.base in names) if names else ()

    def suite(self, repeat: int | None = None, only: tuple[str, ...] = ()) -> Suite:
        """The scenario as a suite (one cell per variant, `only` those named), run `repeat` times each."""
        cells = tuple(v.cell for v in self.variants if not only or v.name in only)
        return Suite(self.name, self.description, self.path, self.text, self.seed, repeat or self.repeat, cells)

    def variant_of_name(self, name: str) -> Variant:
        """The variant called `name` (its suite cell has the same name)."""
        return next(v for v in self.variants if v.name == name)


def scenario_names(directory: Path = SCENARIO_DIR) -> list[str]:
    """The names of the scenario files shipped in `directory`."""
    return sorted(p.stem for p in directory.glob("*.yaml"))


def find_scenario(name_or_path: str, directory: Path = SCENARIO_DIR) -> Path:
    """A scenario file: an existing path, or `directory/NAME.yaml`; ScenarioError naming the known ones."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") and p.is_file():
        return p
    if re.fullmatch(r"[A-Za-z0-9._-]+", name_or_path) and (directory / f"{name_or_path}.yaml").is_file():
        return directory / f"{name_or_path}.yaml"
    known = scenario_names(directory)
    raise ScenarioError(f"unknown scenario {name_or_path!r}{did_you_mean(name_or_path, known)}; known: "
                        f"{', '.join(known)} (or a path to a scenario .yaml file)")


def schedule_file(entries: tuple[dict[str, Any], ...]) -> Path:
    """A file holding `entries` as schedule.json, content-addressed in the kchaos cache (so it outlives the run)."""
    text = "[\n" + ",\n".join(json.dumps(e, sort_keys=True) for e in entries) + "\n]\n"
    path = cache_dir() / "schedules" / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path


def load_scenario(path: Path) -> Scenario:
    """Parse and validate a scenario file; ScenarioError (`file:line: key: problem`) on any problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioError(f"{path}: cannot read scenario file ({getattr(e, 'strerror', None) or e})") from None
    return _load(SpecDoc(path, text, ScenarioError), path, text)


def _load(doc: SpecDoc, path: Path, text: str) -> Scenario:
    d, name = head(doc, path, "scenario", TOP_KEYS)
    for key in ("description", "mechanism", "prevents"):
        if not isinstance(d.get(key), str) or not d[key].strip():
            doc.fail((key,), "is required: a non-empty text")
    seed, repeat = d.get("seed", 0), d.get("repeat", 1)
    versions = _versions(doc, d.get("versions"))
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        doc.fail(("seed",), f"must be a non-negative integer, got {seed!r}")
    if not isinstance(repeat, int) or isinstance(repeat, bool) or not 1 <= repeat <= 100:
        doc.fail(("repeat",), f"must be an integer 1..100, got {repeat!r}")
    base = run_options(doc, ("base",), d.get("base"))
    if "schedule" in base:
        doc.fail(("base", "schedule"), "give the schedule's entries as the scenario's own `schedule` key")
    if "nemesis" in base and d.get("schedule") is not None:
        doc.fail(("base",), "give faults as the scenario's schedule, or as base.nemesis without a schedule")
    raw = d.get("variants")
    if raw is not None and (not isinstance(raw, list) or not raw):
        doc.fail(("variants",), "must be a non-empty list of {name, options, schedule, predict}")
    variants: list[Variant] = []
    seen: set[str] = set()
    for i, v in enumerate(raw or [{"name": name}]):
        where = ("variants", i) if raw else ()
        if not isinstance(v, dict):
            doc.fail(where, "must be a mapping with keys " + ", ".join(VARIANT_KEYS))
        for k in v:
            if k not in VARIANT_KEYS:
                doc.fail(where + (k,), f"unknown key; a variant has {', '.join(VARIANT_KEYS)}")
        vname = v.get("name")
        if not isinstance(vname, str) or not re.fullmatch(r"[A-Za-z0-9._-]{1,48}", vname) or vname in seen:
            doc.fail(where + ("name",), f"{vname!r} must be a unique name of letters, digits, '.', '_' or '-'")
        seen.add(vname)
        opts = run_options(doc, where + ("options",), v.get("options")) if raw else {}
        if "schedule" in opts:
            doc.fail(where + ("options", "schedule"), "give the schedule's entries as the variant's `schedule` key")
        sched_where = where + ("schedule",) if "schedule" in v else ("schedule",)
        sched = v.get("schedule", d.get("schedule"))
        if sched is not None and (not isinstance(sched, list) or not all(isinstance(e, dict) for e in sched)):
            doc.fail(sched_where, "must be a list of {at, nemesis, op} entries, as in a run's schedule.json")
        pwhere = where + ("predict",) if "predict" in v else ("predict",)
        try:
            pred = Prediction.parse(v.get("predict", d.get("predict")))
        except ValueError as e:
            doc.fail(pwhere, str(e))
        since = _since(doc, where + ("predict_since",), v.get("predict_since"))
        params = dict(opts)
        cached = None
        if sched is not None:
            if "nemesis" in {**base, **opts}:
                doc.fail(where + ("options",) if "nemesis" in opts else ("base",),
                         "nemesis and a schedule exclude each other")
            cached = str(schedule_file(tuple(sched)))
            params["schedule"] = cached
        cell = Cell(len(variants), vname, tuple(opts.items()), tuple({**base, **params}.items()))
        try:
            preflight(doc, where + ("options",), cell, base, {})
        except ScenarioError as e:
            marker = f"schedule {cached}: "
            if cached is None or marker not in str(e):
                raise
            doc.fail(sched_where, str(e).split(marker, 1)[1])  # name the scenario's schedule, not its cache file
        # labelled by its name in progress lines and reports; the options stay what they were
        cell = replace(cell, params=(("variant", vname), *cell.params))
        variants.append(Variant(vname, str(v.get("description") or ""), cell,
                                tuple(sched) if sched is not None else None, pred, since,
                                pinned="kafka_version" in opts, base=vname))
    return Scenario(name, d["description"].strip(), d["mechanism"].strip(), d["prevents"].strip(), path.resolve(),
                    text, seed, repeat, tuple(variants), versions)


def _line_name(value: Any) -> str:
    """A version as YAML gives it: `4.4` may arrive as a number."""
    return repr(value) if isinstance(value, float) else str(value)


def _versions(doc: SpecDoc, raw: Any) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        doc.fail(("versions",), "must be a non-empty list of Kafka lines, such as [\"3.7\", \"4.4\"]")
    out = []
    for i, x in enumerate(raw):
        try:
            out.append(line_of(resolve_version(_line_name(x))).line)
        except UnsupportedVersion as e:
            doc.fail(("versions", i), str(e).replace("--kafka-version ", "", 1))
    return tuple(dict.fromkeys(out))


def _since(doc: SpecDoc, where: tuple, raw: Any) -> tuple[tuple[str, Prediction], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict) or not raw:
        doc.fail(where, "must map a Kafka line to the prediction from that line on, such as {\"3.9\": lost > 0}")
    out = []
    for key, text in raw.items():
        line = _line_name(key)
        if line not in LINE_NAMES:
            doc.fail(where + (key,), f"{line!r} is not a Kafka line kchaos runs ({', '.join(LINE_NAMES)})")
        try:
            out.append((line, Prediction.parse(text)))
        except ValueError as e:
            doc.fail(where + (key,), str(e))
    return tuple(sorted(out, key=lambda x: LINE_NAMES.index(x[0])))


__all__ = ["Scenario", "Variant", "Prediction", "ScenarioError", "load_scenario", "find_scenario", "scenario_names",
           "ConfigError"]
