"""The README's demo output and its figures, made from a recorded run of the demo (tests/fixtures/demo), not typed.

`python tests/readme.py` prints both blocks; `python tests/readme.py --write` puts them into README.md between
their markers; `python tests/readme.py --record NIGHT` makes the fixture from a demo night (a directory
`results/suites/demo/<stamp>`): its suite files, and each run's test.json, results.json as the results index
keeps it, and the first lines of its history. tests/unit/test_readme.py checks that README.md holds what this
prints.
"""
from __future__ import annotations

import argparse
import io
import itertools
import json
import re
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

from kchaos.core.suite_files import PROGRESS_FILE, STATE_FILE
from kchaos.harness.cli.console import print_regressions, print_suite
from kchaos.harness.suites.run import finish
from kchaos.harness.suites.suite import load_suite
from kchaos.harness.terminal import make_console
from kchaos.reports.suite.run_index import slim_results

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FIXTURE = ROOT / "tests" / "fixtures" / "demo"
HISTORY_LINES = 200  # of each run's history kept in the fixture: enough to show its shape
BLOCKS = ("demo-output", "demo-figures")


def night() -> Path:
    """The recorded demo night: the fixture's one stamped directory."""
    [stamp] = [p for p in FIXTURE.iterdir() if p.is_dir()]
    return stamp


def _outcomes(recorded: Path, where: Path):
    sdir = where / "results" / "suites" / "demo" / recorded.name
    shutil.copytree(recorded, sdir)
    suite = load_suite(sdir / "suite.yaml")
    return suite, finish(suite, sdir)


def demo_output(recorded: Path) -> str:
    """What `make demo` printed at its end, as a file or a CI log gets it (no colour, nothing wrapped), but for the
    legend under the table."""
    with tempfile.TemporaryDirectory() as tmp:
        suite, outcomes = _outcomes(recorded, Path(tmp))
        out = io.StringIO()
        console = make_console(out, color="never")
        print_suite(console, suite.name, Path("results/suites/demo") / recorded.name, outcomes)
        print_regressions(console, [], None)
    lines = out.getvalue().rstrip("\n").splitlines()
    legend = next(i for i, line in enumerate(lines) if line.startswith("verdict: "))
    end = next(i for i, line in enumerate(lines) if line.startswith("compare: "))
    return "```\n" + "\n".join(lines[:legend] + lines[end:]) + "\n```"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def demo_figures(recorded: Path) -> str:
    """The three cells in words, every figure from the recorded rows."""
    with tempfile.TemporaryDirectory() as tmp:
        _, outcomes = _outcomes(recorded, Path(tmp))
    acks1, kills, power = (o.row or {} for o in outcomes)
    minutes = sum(o.seconds for o in outcomes) / 60
    against = (f"against {acks1['longest_outage_s']:.1f} s for acks=1" if acks1["longest_outage_s"]
               else "while acks=1 never went a second without one")
    items = [
        f"1. **acks=1, the leader cut off from the other brokers.** The clients still reach it, and it keeps "
        f"acknowledging writes that only it holds. When the cut heals it truncates its log to the new leader's: "
        f"{acks1['lost']:,} of {acks1['acked']:,} acknowledged writes were lost ({_pct(acks1['loss_rate'])}). "
        f"`acks=1` never promised more, so the cell passes; the loss is what it measured.",
        f"2. **acks=all with min.insync.replicas=2, under leader partitions and kills.** The isolated leader cannot "
        f"acknowledge alone. Nothing acknowledged was lost ({kills['acked']:,} writes): the promise held. The price "
        f"is availability: writes were acknowledged {_pct(kills['acked_time_share'])} of the time, and the longest "
        f"outage lasted {kills['longest_outage_s']:.1f} s, {against}.",
        f"3. **acks=all, power lost on every node at once.** Kafka does not fsync: a write waits in each "
        f"replica's page cache until the kernel writes it back, about 30 s later. {power['lost']:,} of "
        f"{power['acked']:,} acknowledged writes were lost ({_pct(power['loss_rate'])}). Kafka promises nothing "
        f"once every replica has lost its data, so the cell passes, severe.",
    ]
    said = [textwrap.fill(item, 115, subsequent_indent="   ", break_on_hyphens=False) for item in items]
    return "\n".join([*said, "", f"This recorded run took {minutes:.1f} minutes after set-up, on a 2-core machine."])


def render() -> dict[str, str]:
    """Each README block's text, from the recorded night."""
    recorded = night()
    return {"demo-output": demo_output(recorded), "demo-figures": demo_figures(recorded)}


def blocks(text: str) -> dict[str, str]:
    """The README's blocks as they stand: the text between each block's begin and end markers."""
    out = {}
    for name in BLOCKS:
        m = re.search(rf"<!-- {name}: written .*? -->\n(.*?)\n<!-- {name}: end -->", text, re.S)
        if m is None:
            raise ValueError(f"README.md has no {name} block")
        out[name] = m.group(1)
    return out


def commands() -> list[str]:
    """Every command of the README's `sh` blocks, without its comment, in order."""
    out = []
    for block in re.findall(r"```sh\n(.*?)```", README.read_text(), re.S):
        out += [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    return out


def write() -> None:
    """Put the rendered blocks into README.md."""
    text = README.read_text()
    for name, body in render().items():
        text = re.sub(rf"(<!-- {name}: written .*? -->\n).*?(\n<!-- {name}: end -->)",
                      lambda m, body=body: m.group(1) + body + m.group(2), text, flags=re.S)
    README.write_text(text)


def record(source: Path) -> None:
    """Make the fixture from a demo night: suite files, and per run test.json, slim results.json, and the first
    HISTORY_LINES lines of its history."""
    dest = FIXTURE / source.name
    shutil.rmtree(FIXTURE, ignore_errors=True)
    dest.mkdir(parents=True)
    for name in ("suite.yaml", STATE_FILE, PROGRESS_FILE):
        shutil.copy2(source / name, dest / name)
    for history in sorted(source.glob("*/*/history.jsonl")):
        run = history.parent
        into = dest / run.relative_to(source)
        into.mkdir(parents=True)
        shutil.copy2(run / "test.json", into / "test.json")
        results = json.loads((run / "results.json").read_text())
        (into / "results.json").write_text(json.dumps(slim_results(results), indent=1) + "\n")
        with open(history) as src, open(into / "history.jsonl", "w") as out:
            out.writelines(itertools.islice(src, HISTORY_LINES))
    (FIXTURE / "README.md").write_text(
        "A recorded run of `make demo` (suites/demo.yaml), from which tests/readme.py writes the README's demo\n"
        "output and figures. Each run keeps its test.json, its results.json as the results index keeps it, and the\n"
        f"first {HISTORY_LINES} lines of its history. Made with `python tests/readme.py --record NIGHT`.\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write", action="store_true", help="write the blocks into README.md")
    p.add_argument("--record", type=Path, metavar="NIGHT", help="make the fixture from this demo night first")
    args = p.parse_args(argv)
    if args.record:
        record(args.record.resolve())
    if args.write or args.record:
        write()
    else:
        for name, body in render().items():
            print(f"== {name}\n{body}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
