"""`kchaos compare DIR`: one row per configuration cell over every run below DIR, as compare.csv and compare.html.

Runs are grouped by their whole configuration except what does not change the
experiment (name, seed, store, Spark master, where Kafka came from): the
repetitions of one suite cell form one row. A row says what the configuration
promises (no loss: acks=all, min.insync.replicas >= 2, no unclean election,
unless every node loses power at once; no duplicates: idempotence) and
whether every repetition kept that promise.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers import RESULTS_FILE, TEST_FILE, find_runs
from checkers.reference import Settings
from checkers.table import in_faults
from reports import ReportsInputError
from reports.html import Raw, esc, link, png, table, write_page
from reports.promise import lost_in_promise, promise_of

# Options that do not change what is being measured; runs differing only in these are repetitions.
NOT_CONFIGURATION = {"name", "seed", "store", "spark_master", "versions", "argv", "cluster.kafka_dist",
                     "cluster.base_image", "cluster.subnet", "nemesis.schedule_file", "history_start_unix_ms"}
ALWAYS = ("acks", "min_insync", "rf", "unclean", "idempotence", "nemesis")
COLUMNS = ("cell", *ALWAYS, "other", "runs", "valid", "invalid", "unknown", "acked", "lost", "loss_rate",
           "lost_outside_promise", "duplicate", "availability_in_faults", "send_p50_ms", "send_p99_ms", "promise", "promise_held",
           "run_dirs")


class CompareError(ReportsInputError):
    """Nothing to compare below the directory (exit code 3)."""


@dataclass(frozen=True)
class Run:
    """One run directory with its test description and results (empty when it was never checked)."""

    path: Path
    test: dict[str, Any]
    results: dict[str, Any]


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flat(v, key + "."))
        else:
            out[key] = tuple(v) if isinstance(v, list) else v
    return out


def configuration(test: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The options of `test` that define its configuration cell, as sorted (dotted key, value) pairs."""
    return tuple(sorted((k, v) for k, v in _flat(test).items() if k not in NOT_CONFIGURATION))


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


def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 3) if xs else None


def _row(root: Path, key: tuple, runs: list[Run], varying: list[str]) -> dict[str, Any]:
    cfg = dict(key)
    settings = Settings.of(runs[0].test)
    checked = [r.results for r in runs if r.results.get("counts")]
    verdicts = [r.results.get("valid", "unknown") for r in runs]
    total = {k: sum(c["counts"].get(k) or 0 for c in checked) for k in ("acked", "lost", "duplicate")}
    total["lost_in_promise"] = sum(lost_in_promise(r.results, r.test) for r in runs if r.results.get("counts"))
    avail = [in_faults((c.get("timeline") or {}).get("availability") or {}) for c in checked]
    invoked = sum(a[1] for a in avail)
    lat = [((c.get("latency_ms") or {}).get("send") or {}).get("ok") or {} for c in checked]
    promise = promise_of(runs[0].test)
    return {
        "cell": ",".join(sorted({r.test.get("name", "?") for r in runs})),
        "acks": settings.acks, "min_insync": settings.min_insync, "rf": cfg.get("topic.replication_factor"),
        "unclean": settings.unclean, "idempotence": settings.idempotence,
        "nemesis": ",".join(cfg.get("nemesis.names") or ()) or None,
        "other": " ".join(f"{k.split('.')[-1]}={cfg.get(k)}" for k in varying) or None,
        "runs": len(runs), "valid": verdicts.count(True), "invalid": verdicts.count(False),
        "unknown": len(runs) - verdicts.count(True) - verdicts.count(False),
        **{k: total[k] for k in ("acked", "lost", "duplicate")},
        "lost_outside_promise": total["lost"] - total["lost_in_promise"],
        "loss_rate": round(total["lost"] / total["acked"], 6) if total["acked"] else None,
        "availability_in_faults": round(sum(a[0] for a in avail) / invoked, 4) if invoked else None,
        "send_p50_ms": _median([x["p50"] for x in lat if x.get("p50") is not None]),
        "send_p99_ms": max((x["p99"] for x in lat if x.get("p99") is not None), default=None),
        "promise": promise.text,
        "promise_held": None if not (promise.no_loss or promise.no_duplicates) or not checked
        else not promise.broken(total),
        "run_dirs": " ".join(str(r.path.relative_to(root)) for r in runs),
    }


def compare_rows(root: Path, runs: list[Run]) -> list[dict[str, Any]]:
    """One row per configuration cell of `runs`, in the order cells first appear (sorted run paths)."""
    groups: dict[tuple, list[Run]] = {}
    for r in runs:
        groups.setdefault(configuration(r.test), []).append(r)
    keys = [dict(k) for k in groups]
    shown = {"producer.acks", "topic.min_insync", "topic.replication_factor", "topic.unclean",
             "producer.idempotence", "nemesis.names"}
    varying = sorted(k for k in set().union(*keys) if k not in shown
                     and len({repr(d.get(k)) for d in keys}) > 1) if keys else []
    return [_row(Path(root), k, rs, varying) for k, rs in groups.items()]


def heatmap(rows: list[dict[str, Any]]) -> bytes | None:
    """PNG: lost acknowledged writes over acks x min.insync.replicas, one panel per nemesis; None without data.

    Colour is the loss rate (lost / acked); each square is labelled lost/acked,
    with the verdict on the configuration's promise when it makes one. Rows
    that differ in other options are summed into the same square.
    """
    import matplotlib
    from matplotlib.figure import Figure

    rows = [r for r in rows if r["acked"]]
    if not rows:
        return None
    nemeses = sorted({r["nemesis"] or "none" for r in rows})
    acks = [a for a in ("0", "1", "all") if any(str(r["acks"]) == a for r in rows)]
    misr = sorted({r["min_insync"] for r in rows if isinstance(r["min_insync"], int)})
    fig = Figure(layout="constrained", figsize=(1.8 + 2.2 * len(nemeses) + 0.6 * len(acks), 1.6 + 0.8 * len(misr)))
    axes = fig.subplots(1, len(nemeses), squeeze=False, sharey=True)
    cmap = matplotlib.colormaps["Reds"].with_extremes(bad="#eeeeee")
    top = max((r["lost"] / r["acked"] for r in rows), default=0) or 1e-9
    for ax, nem in zip(axes[0], nemeses):
        grid = [[math.nan] * len(acks) for _ in misr]
        for i, m in enumerate(misr):
            for j, a in enumerate(acks):
                cell = [r for r in rows if (r["nemesis"] or "none") == nem and str(r["acks"]) == a and r["min_insync"] == m]
                if not cell:
                    continue
                lost, acked = sum(r["lost"] for r in cell), sum(r["acked"] for r in cell)
                grid[i][j] = lost / acked
                held = [r["promise_held"] for r in cell if r["promise_held"] is not None]
                outside = sum(r.get("lost_outside_promise") or 0 for r in cell)
                mark = ("\npromise held" if all(held) else "\nPROMISE BROKEN") if held else ""
                mark += f"\n{outside} outside the guarantee" if held and outside else ""
                ax.text(j, i, f"{lost}/{acked}{mark}", ha="center", va="center", fontsize=8,
                        color="white" if grid[i][j] > top * 0.6 else "black")
        im = ax.imshow(grid, cmap=cmap, vmin=0, vmax=top, aspect="auto")
        ax.set_xticks(range(len(acks)), [f"acks={a}" for a in acks])
        ax.set_yticks(range(len(misr)), [f"min.insync={m}" for m in misr])
        ax.set_title(nem.replace(",", ",\n"), fontsize=9)
    fig.colorbar(im, ax=axes[0].tolist(), label="lost / acked")
    fig.suptitle("Lost acknowledged writes (lost/acked per square)", fontsize=11)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()


def _report_link(root: Path, run_dir: str) -> str:
    rel = f"{run_dir}/report.html"
    return link(rel, Path(run_dir).name) if (root / rel).exists() else esc(Path(run_dir).name)


def write_compare(root: Path, title: str | None = None) -> list[dict[str, Any]]:
    """Write root/compare.csv and root/compare.html for every run below `root`; return the rows.

    Raises CompareError when no run below `root` has a test.json.
    """
    root = Path(root)
    runs = load_runs(root)
    if not runs:
        raise CompareError(f"{root}: no runs (directories with history.jsonl and test.json) below it")
    rows = compare_rows(root, runs)
    tmp = root / ".compare.csv.tmp"
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, root / "compare.csv")
    shown = [{**r, "valid": r["valid"], "promise_held": Raw(_held(r["promise_held"])),
              "run_dirs": Raw(" ".join(_report_link(root, d) for d in r["run_dirs"].split()))} for r in rows]
    cols = [c for c in COLUMNS if c != "other" or any(r["other"] for r in rows)]
    image = heatmap(rows)
    broken = [r for r in rows if r["promise_held"] is False]
    body = (f"<h1>{esc(title or 'Comparison')}</h1><p class=muted>{len(runs)} runs in {len(rows)} configurations "
            f"below <code>{esc(root)}</code>. Loss rate = lost / acked over every repetition; availability in "
            f"faults = ok / invoked sends inside fault windows; p50 is the median of the runs' p50, p99 the "
            f"largest of their p99.</p>"
            f"<p>{_held(not broken)} {len(broken)} of {sum(r['promise_held'] is not None for r in rows)} "
            f"configurations that promise something broke their promise.</p>"
            + (png(image, "lost acknowledged writes over acks x min.insync.replicas per nemesis") if image else
               "<p class=muted>No run acknowledged anything: no heatmap.</p>")
            + "<h2>Configurations</h2>" + table(shown, cols) + f"<p>{link('compare.csv', 'compare.csv')}</p>")
    write_page(root / "compare.html", title or f"kchaos compare {root.name}", body)
    return rows


def _held(held: bool | None) -> str:
    return {True: '<span class="verdict valid-true">held</span>',
            False: '<span class="verdict valid-false">BROKEN</span>'}.get(held, '<span class="muted">n/a</span>')
