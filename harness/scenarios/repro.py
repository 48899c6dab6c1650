"""Re-running a recorded run: same configuration, seed and fault schedule; did its anomalies come back?

`repro(RUN_DIR)` reads the run's test.json, schedule.json and results.json,
replays it `attempts` times into `<store>/repro/<name>/<stamp>/`, and writes
there `repro.json`: the anomaly kinds of the original, and per attempt its run
directory, anomaly kinds, counts, whether the faults hit the same nodes, and
whether the original's anomalies reappeared. An attempt that errors is
recorded and the next one runs.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console

from kchaos.checkers.verdict.observed import anomaly_kinds
from kchaos.core.config import ConfigError, TestConfig
from kchaos.core.history import HistoryError, read_history
from kchaos.core.store import check_store, stamped_dir
from kchaos.harness.suites.run import Runner
from kchaos.harness.terminal import heading, make_console

# test.json's facts of the run, not options: what it ran on and when, never fed back as configuration.
RECORDED_ONLY = ("versions", "argv", "history_start_unix_ms", "hosts_file", "accepted_host_keys", "page_cache",
                 "kafka_tools", "releases", "recovery")

REPRO_FILE = "repro.json"


def recorded_config(run: Path) -> tuple[TestConfig, dict[str, Any]]:
    """The run's TestConfig, replaying its own schedule.json, and its results.json; ConfigError if unusable."""
    run = Path(run)
    if not run.is_dir():
        raise ConfigError(f"{run}: not a run directory")
    for name in ("test.json", "schedule.json", "results.json"):
        if not (run / name).is_file():
            hint = " (check it first: kchaos check RUN)" if name == "results.json" else ""
            raise ConfigError(f"{run}: no {name}; not a finished kchaos run{hint}")
    try:
        test = json.loads((run / "test.json").read_text())
        results = json.loads((run / "results.json").read_text())
    except json.JSONDecodeError as e:
        raise ConfigError(f"{run}: test.json or results.json is not JSON ({e.msg}, line {e.lineno})") from None
    if not isinstance(test, dict) or not isinstance(results, dict):
        raise ConfigError(f"{run}: test.json and results.json must hold JSON objects")
    recorded = {k: v for k, v in test.items() if k not in RECORDED_ONLY}
    try:
        cfg = TestConfig.from_dict(recorded)
    except (ConfigError, TypeError) as e:
        raise ConfigError(f"{run}/test.json: {e}") from None
    cfg = cfg.with_(nemesis=replace(cfg.nemesis, schedule_file=str((run / "schedule.json").resolve())))
    return cfg, results


def fault_trace(run: Path) -> list[tuple[str, tuple[str, ...]]]:
    """The faults a run applied, in order: (f, nodes) of every nemesis completion recorded ok."""
    try:
        return [(op["f"], tuple(op.get("nodes") or ())) for op in read_history(Path(run) / "history.jsonl")
                if op.get("process") == "nemesis" and op.get("type") == "ok" and op.get("f") != "heal"]
    except (OSError, HistoryError):
        return []


def attempt(cfg: TestConfig, runner: Runner, console: Console, argv: list[str], label: str,
            target: list[str], original: Path | None = None) -> dict[str, Any]:
    """Run `cfg` once; return what it showed: run, anomalies, counts, reproduced (and error, if it broke)."""
    from kchaos.clusters.distribution import DistributionError
    from kchaos.clusters.engine import EngineError
    from kchaos.clusters.image import ImageError
    try:
        run, results = runner(cfg, argv=argv, console=console, label=label)
    except (EngineError, DistributionError, ImageError, KeyboardInterrupt):
        raise
    except Exception as e:
        return {"run": None, "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                "reproduced": False, "anomalies": [], "counts": {}}
    kinds = anomaly_kinds(results)
    out = {"run": str(run), "verdict": results.get("verdict"), "valid": results.get("valid"), "anomalies": kinds,
           "counts": results.get("counts", {}),
           "reproduced": set(target) <= set(kinds) and (bool(target) or not kinds)}
    if original is not None:
        out["same_faults"] = fault_trace(run) == fault_trace(original)
    return out


def repro(run: Path, store: Path, *, attempts: int = 1, spark_master: str = "local[*]",
          console: Console | None = None, argv: list[str] | None = None,
          runner: Runner | None = None) -> tuple[Path, dict[str, Any]]:
    """Replay `run` `attempts` times; return the repro directory and the report written to repro.json."""
    from kchaos.harness.build import preflight
    from kchaos.harness.runner import run_test

    console = console or make_console()
    cfg, results = recorded_config(run)
    cfg = preflight(cfg.with_(spark_master=spark_master, store=str(store)))  # the user's store, not the recorded one
    store = check_store(str(store))
    rdir = stamped_dir(store / "repro" / cfg.name)
    shutil.copy2(Path(run) / "schedule.json", rdir / "schedule.json")
    cfg = cfg.with_(store=str(rdir), nemesis=replace(cfg.nemesis, schedule_file=str(rdir / "schedule.json")))
    target = anomaly_kinds(results)
    report: dict[str, Any] = {"original": str(Path(run).resolve()), "anomalies": target, "seed": cfg.seed,
                              "attempts": attempts, "reproduced": 0, "runs": []}
    console.print(f"[bold]repro[/] {run}: anomalies {', '.join(target) or 'none'}; {attempts} attempt(s) → {rdir}")
    for i in range(attempts):
        heading(console, f"repro attempt {i + 1}/{attempts}")
        out = attempt(cfg, runner or run_test, console, argv or [], f"repro {i + 1}/{attempts}", target, Path(run))
        report["runs"].append(out)
        report["reproduced"] = sum(r["reproduced"] for r in report["runs"])
        (rdir / REPRO_FILE).write_text(json.dumps(report, indent=2) + "\n")
    report["dir"] = str(rdir)
    return rdir, report
