"""`kchaos compare DIR`: one row per configuration cell over every run below DIR, as compare.csv and compare.html.

Runs are grouped by their whole configuration except what does not change the
experiment (name, seed, store, Spark master, where Kafka came from): the
repetitions of one suite cell form one row. A row says what the configuration
promises (no loss: acks=all, min.insync.replicas >= 2, no unclean election,
unless every node loses power at once; no duplicates: idempotence) and
whether every repetition kept that promise.
"""
from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from checkers import RESULTS_FILE, TEST_FILE, find_runs
from checkers.reference import Settings
from checkers.table import in_faults
from reports import ReportsInputError
from reports.html import write_page
from reports.promise import lost_in_promise, promise_of

# Options that do not change what is being measured; runs differing only in these are repetitions.
NOT_CONFIGURATION = {"name", "seed", "store", "spark_master", "versions", "argv", "cluster.kafka_dist",
                     "cluster.base_image", "cluster.subnet", "nemesis.schedule_file", "history_start_unix_ms"}
# Options with a column of their own; any other option that differs between cells goes to `other`.
SHOWN = {"producer.acks", "topic.min_insync", "topic.replication_factor", "topic.unclean", "producer.idempotence",
         "nemesis.names"}
ALWAYS = ("acks", "min_insync", "rf", "unclean", "idempotence", "nemesis")
COLUMNS = ("cell", *ALWAYS, "other", "runs", "valid", "invalid", "unknown", "acked", "lost", "loss_rate",
           "lost_outside_promise", "duplicate", "availability_in_faults", "send_p50_ms", "send_p99_ms", "promise", "promise_held",
           "run_dirs")
SUMMED = ("runs", "valid", "invalid", "checked", "acked", "lost", "duplicate", "lost_in_promise", "ok_in_faults",
          "invoked_in_faults")
HEATMAP_ACKS = ("0", "1", "all")


class CompareError(ReportsInputError):
    """Nothing to compare below the directory (exit code 3)."""


@dataclass(frozen=True)
class Run:
    """One run directory with its test description and results (empty when it was never checked)."""

    path: Path
    test: dict[str, Any]
    results: dict[str, Any]


def configuration(test: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The options of `test` that define its configuration cell, as sorted (dotted key, value) pairs."""
    flat = (pd.json_normalize(test).to_dict("records") or [{}])[0]
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in flat.items()
                        if k not in NOT_CONFIGURATION))


def load_runs(root: Path) -> list[Run]:
    """Every run below `root` with a test.json, with its results.json ({} if it has none)."""
    runs = []
    for path in find_runs(Path(root)):
        test_file, res_file = path / TEST_FILE, path / RESULTS_FILE
        if not test_file.exists():
            continue
        try:
            test = json.loads(test_file.read_text(encoding="utf-8"))
            results = json.loads(res_file.read_text(encoding="utf-8")) if res_file.exists() else {}
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue  # a run being written right now, or damaged: not comparable
        runs.append(Run(path, test, results))
    return runs


def _facts(root: Path, run: Run, cfg: dict[str, Any], varying: list[str]) -> dict[str, Any]:
    """One run's share of its row: its configuration's columns, and its counts (zero when never checked)."""
    res, settings = run.results, Settings.of(run.test)
    counts = res.get("counts") or {}
    ok, invoked = in_faults((res.get("timeline") or {}).get("availability") or {})
    latency = ((res.get("latency_ms") or {}).get("send") or {}).get("ok") or {}
    return {"cell": run.test.get("name", "?"), "acks": settings.acks, "min_insync": settings.min_insync,
            "rf": cfg.get("topic.replication_factor"), "unclean": settings.unclean,
            "idempotence": settings.idempotence, "nemesis": ",".join(cfg.get("nemesis.names") or ()) or None,
            "other": " ".join(f"{k.split('.')[-1]}={cfg.get(k)}" for k in varying) or None,
            "runs": 1, "valid": res.get("valid") is True, "invalid": res.get("valid") is False,
            "checked": bool(counts), **{k: counts.get(k) or 0 for k in ("acked", "lost", "duplicate")},
            "lost_in_promise": lost_in_promise(res, run.test) if counts else 0,
            "ok_in_faults": ok, "invoked_in_faults": invoked,
            "send_p50_ms": latency.get("p50"), "send_p99_ms": latency.get("p99"),
            "promise": promise_of(run.test), "run_dirs": str(run.path.relative_to(root))}


def _rounded(s: pd.Series, digits: int) -> pd.Series:
    # Python's round, not numpy's: numpy rounds 11.7225 to 11.722, where the value is above the half.
    return s.map(lambda x: round(x, digits))


def _held(row: pd.Series) -> bool | None:
    p = row["promise"]
    return None if not (p.no_loss or p.no_duplicates) or not row["checked"] else not p.broken(row)


def compare_rows(root: Path, runs: list[Run]) -> pd.DataFrame:
    """One row per configuration cell of `runs` (columns COLUMNS, missing values None), in the order cells first
    appear (sorted run paths): counts summed over repetitions, the median of their p50, the largest p99."""
    configs = [configuration(r.test) for r in runs]
    keys = [dict(c) for c in dict.fromkeys(configs)]
    varying = sorted(k for k in set().union(*keys) if k not in SHOWN and len({repr(d.get(k)) for d in keys}) > 1)
    # object columns keep ints and None as they are (rf, min_insync); only the measured columns are numbers
    facts = pd.DataFrame([{"config": c, **_facts(Path(root), r, dict(c), varying)} for r, c in zip(runs, configs)],
                         dtype=object).astype({**dict.fromkeys(SUMMED, "int64"), "send_p50_ms": float,
                                               "send_p99_ms": float})
    rows = facts.groupby("config", sort=False).agg({
        "cell": lambda names: ",".join(sorted(set(names))), **dict.fromkeys((*ALWAYS, "other", "promise"), "first"),
        **dict.fromkeys(SUMMED, "sum"), "send_p50_ms": "median", "send_p99_ms": "max", "run_dirs": " ".join})
    rows["unknown"] = rows.runs - rows.valid - rows.invalid
    rows["lost_outside_promise"] = rows.lost - rows.lost_in_promise
    acked, invoked = rows.acked, rows.invoked_in_faults
    rows["loss_rate"] = _rounded(rows.lost / acked.where(acked > 0), 6)
    rows["availability_in_faults"] = _rounded(rows.ok_in_faults / invoked.where(invoked > 0), 4)
    rows["send_p50_ms"] = _rounded(rows.send_p50_ms, 3)
    rows["promise_held"] = rows.apply(_held, axis=1).astype(object)
    rows["promise"] = [p.text for p in rows.promise]
    out = rows[list(COLUMNS)].astype(object)
    return out.where(out.notna(), None).reset_index(drop=True)


def heatmap(rows: list[dict[str, Any]]) -> bytes | None:
    """PNG: lost acknowledged writes over acks x min.insync.replicas, one panel per nemesis; None without data.

    Colour is the loss rate (lost / acked); each square is labelled lost/acked,
    with the verdict on the configuration's promise when it makes one. Rows
    that differ in other options are summed into the same square.
    """
    import matplotlib
    from matplotlib.figure import Figure

    df = pd.DataFrame(rows)
    df = df.assign(nemesis=df.nemesis.fillna("none"), acks=df.acks.astype(str),
                   min_insync=pd.to_numeric(df.min_insync, errors="coerce"))
    df = df[(df.acked > 0) & df.acks.isin(HEATMAP_ACKS) & df.min_insync.notna()].astype({"min_insync": int})
    if df.empty:
        return None
    squares = df.groupby(["nemesis", "min_insync", "acks"]).agg(
        lost=("lost", "sum"), acked=("acked", "sum"), outside=("lost_outside_promise", "sum"),
        held=("promise_held", lambda h: h.dropna().all() if h.notna().any() else None))
    squares["rate"] = squares.lost / squares.acked
    nemeses, misr = sorted(set(df.nemesis)), sorted(set(df.min_insync))
    acks = [a for a in HEATMAP_ACKS if a in set(df.acks)]
    fig = Figure(layout="constrained", figsize=(1.8 + 2.2 * len(nemeses) + 0.6 * len(acks), 1.6 + 0.8 * len(misr)))
    axes = fig.subplots(1, len(nemeses), squeeze=False, sharey=True)
    cmap = matplotlib.colormaps["Reds"].with_extremes(bad="#eeeeee")
    top = (df.lost / df.acked).max() or 1e-9
    for ax, nem in zip(axes[0], nemeses):
        panel = squares.loc[nem]
        for s in panel.itertuples():
            mark = "" if pd.isna(s.held) else "\npromise held" if s.held else "\nPROMISE BROKEN"
            mark += f"\n{s.outside} outside the guarantee" if mark and s.outside else ""
            ax.text(acks.index(s.Index[1]), misr.index(s.Index[0]), f"{s.lost}/{s.acked}{mark}", ha="center",
                    va="center", fontsize=8, color="white" if s.rate > top * 0.6 else "black")
        im = ax.imshow(panel.rate.unstack("acks").reindex(index=misr, columns=acks).to_numpy(float), cmap=cmap,
                       vmin=0, vmax=top, aspect="auto")
        ax.set_xticks(range(len(acks)), [f"acks={a}" for a in acks])
        ax.set_yticks(range(len(misr)), [f"min.insync={m}" for m in misr])
        ax.set_title(nem.replace(",", ",\n"), fontsize=9)
    fig.colorbar(im, ax=axes[0].tolist(), label="lost / acked")
    fig.suptitle("Lost acknowledged writes (lost/acked per square)", fontsize=11)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()


def write_compare(root: Path, title: str | None = None) -> list[dict[str, Any]]:
    """Write root/compare.csv and root/compare.html for every run below `root`; return the rows.

    Raises CompareError when no run below `root` has a test.json.
    """
    root = Path(root)
    runs = load_runs(root)
    if not runs:
        raise CompareError(f"{root}: no runs (directories with history.jsonl and test.json) below it")
    table = compare_rows(root, runs)
    tmp = root / ".compare.csv.tmp"
    table.to_csv(tmp, index=False, lineterminator="\r\n")  # CRLF, as the csv module and checks.csv write it
    os.replace(tmp, root / "compare.csv")
    rows = table.to_dict("records")
    write_page(root / "compare.html", title or f"kchaos compare {root.name}", template="compare.html.j2",
               heading=title or "Comparison", root=root, runs=len(runs), rows=rows, heatmap=heatmap(rows),
               columns=[c for c in COLUMNS if c != "other" or table.other.notna().any()],
               broken=sum(r["promise_held"] is False for r in rows),
               promising=sum(r["promise_held"] is not None for r in rows),
               reported={d for dirs in table.run_dirs for d in dirs.split() if (root / d / "report.html").exists()})
    return rows
