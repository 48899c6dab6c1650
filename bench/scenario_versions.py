"""Benchmark: each scenario variant's prediction and rate on each Kafka line, as findings/version-grid.md's table.

    python bench/scenario_versions.py [--ledger FILE] [--scenarios NAME,...]

Reads the rates ledger (bench/data/scenario-rates.jsonl, which
bench/scenario_campaign.py fills; `--versions listed` runs each variant on
the lines its scenario lists). A row is a scenario's variant, a column a
Kafka line (core/kafka_versions.py), a cell `k/n` repetitions that bore the
prediction out: `NAME-kafka-LINE` is the variant NAME on LINE. Only a
variant's current configuration counts (its newest ledger line's options and
prediction, as in bench/scenario_rates.py), of the variants the scenario files
name today. Where a line's prediction
differs from the row's first (a scenario's `predict_since`), the cell says it.
Under the table, a line per Kafka line (cells, repetitions, predictions held,
the cells with a miss), then what changed from the oldest line on each later
one: a row whose prediction differs by line, or that held on every
repetition on one line and missed on the other.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scenario_rates import LEDGER, RatesError, Rep, file_order, rate_of, read_ledger, row_name

from kchaos.core.exit_codes import EXIT_BAD_INPUT
from kchaos.core.kafka_versions import LINE_NAMES, UnsupportedVersion, line_of, split_on_line


def current(reps: list[Rep]) -> list[Rep]:
    """The repetitions of each (scenario, variant) that share its newest checked one's options and prediction
    (errored ones included: a cell counts them apart)."""
    newest: dict[tuple[str, str], Rep] = {}
    for r in sorted(reps, key=lambda r: (r.date, r.id)):
        if r.matched is not None:
            newest[(r.scenario, r.variant)] = r
    return [r for r in reps if (r.scenario, r.variant) in newest
            and (r.config, r.predict) == (newest[(r.scenario, r.variant)].config,
                                          newest[(r.scenario, r.variant)].predict)]


def matrix(reps: list[Rep], order: dict[str, list[str]]) -> dict[tuple[str, str], dict[str, list[Rep]]]:
    """(scenario, variant) -> Kafka line -> the current repetitions there, for the variants `order` names (a
    scenario's, in file order), rows in that order."""
    out: dict[tuple[str, str], dict[str, list[Rep]]] = {(s, v): {} for s, vs in sorted(order.items()) for v in vs}
    for r in sorted(current(reps), key=lambda r: r.date):
        try:
            line = line_of(r.kafka or "").line
        except UnsupportedVersion:
            continue
        row = out.get((r.scenario, split_on_line(r.variant)[0]))
        if row is not None:
            row.setdefault(line, []).append(r)
    return {k: row for k, row in out.items() if row}


def table(m: dict[tuple[str, str], dict[str, list[Rep]]]) -> str:
    """The Markdown table: a row per scenario variant, a column per Kafka line with any repetition."""
    lines = [x for x in LINE_NAMES if any(x in row for row in m.values())]
    out = ["| scenario · variant | prediction | " + " | ".join(lines) + " |",
           "|---|---|" + "---:|" * len(lines)]
    for (scenario, variant), row in m.items():
        first = row[min(row, key=LINE_NAMES.index)][-1].predict
        cells = []
        for line in lines:
            reps = row.get(line)
            if not reps:
                cells.append("")
                continue
            predict = reps[-1].predict
            cells.append(rate_of(reps).fraction() + (f" (`{predict}`)" if predict != first else ""))
        name = row_name(scenario, variant)
        out.append(f"| {name} | `{first}` | " + " | ".join(cells) + " |")
    out += ["", "A cell is k/n: the repetitions on that line whose observation bore the prediction out, of those "
                "checked (errored ones are counted apart, +N errored)."]
    return "\n".join(out)


def against(m: dict[tuple[str, str], dict[str, list[Rep]]], base: str = LINE_NAMES[0]) -> str:
    """What changed from the `base` line on each later one, for the rows measured on both: a prediction that
    differs by line (a scenario's `predict_since`), or one that held on every repetition on one line and missed on
    the other; then how many rows held alike on each line. Errored repetitions count on neither side."""
    changes, alike = [], {}
    for (scenario, variant), row in m.items():
        if base not in row:
            continue
        name = row_name(scenario, variant)
        was, was_predict = rate_of(row[base]), row[base][-1].predict
        for line in sorted(set(row) - {base}, key=LINE_NAMES.index):
            now, predict = rate_of(row[line]), row[line][-1].predict
            if predict != was_predict:
                changes.append(f"- {name}, {line}: predicted to differ; `{predict}` held {now.fraction()} "
                               f"({base}: `{was_predict}` held {was.fraction()})")
            elif was.runs and now.runs and (was.matched == was.runs) != (now.matched == now.runs):
                held, missed = (base, line) if was.matched == was.runs else (line, base)
                changes.append(f"- {name}, {line}: **held on {held}, missed on {missed}**; `{predict}` held "
                               f"{was.fraction()} on {base} and {now.fraction()} on {line}")
            else:
                alike[line] = alike.get(line, 0) + 1
    out = [f"Against {base}:", *(changes or ["- no row changed"])]
    if alike:
        out.append("- held alike: " + ", ".join(f"{n} on {line}" for line, n in
                                                 sorted(alike.items(), key=lambda x: LINE_NAMES.index(x[0]))))
    return "\n".join(out)


def per_line(m: dict[tuple[str, str], dict[str, list[Rep]]]) -> str:
    """A Markdown table with a row per Kafka line: the cells measured there, their repetitions, how many bore their
    prediction out, and the cells where one did not."""
    out = ["| line | cells | repetitions | prediction held | cells with a miss |", "|---|---:|---:|---:|---|"]
    for line in LINE_NAMES:
        cells = {row_name(s, v): rate_of(row[line]) for (s, v), row in m.items() if line in row}
        if not cells:
            continue
        runs, held = sum(r.runs for r in cells.values()), sum(r.matched for r in cells.values())
        missed = ", ".join(f"{name} ({r.fraction()})" for name, r in cells.items() if r.matched < r.runs)
        out.append(f"| {line} | {len(cells)} | {runs} | {held}/{runs} | {missed or '-'} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Print the table; exit 3 when the ledger cannot be read, 1 when it holds nothing to show."""
    ap = argparse.ArgumentParser(prog="bench/scenario_versions.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--ledger", type=Path, default=LEDGER)
    ap.add_argument("--scenarios", help="only these scenarios, comma-separated")
    a = ap.parse_args(argv)
    try:
        reps = read_ledger(a.ledger)
    except RatesError as e:
        print(f"scenario_versions: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    only = set(a.scenarios.split(",")) if a.scenarios else None
    m = matrix(reps, {s: vs for s, vs in file_order().items() if not only or s in only})
    if not m:
        print("scenario_versions: no checked repetitions in the ledger", file=sys.stderr)
        return 1
    print(table(m))
    print()
    print(per_line(m))
    print()
    print(against(m))
    return 0


if __name__ == "__main__":
    sys.exit(main())
