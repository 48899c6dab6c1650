"""`kchaos`'s argument parser: every subcommand with a one-line summary and a paragraph of its own, every option
with its help and its default, the global options (--version, --color, --quiet), the exit codes at the end of
`kchaos --help`, and one-line errors (exit code 3) that suggest the name that was probably meant.
"""
from __future__ import annotations

import argparse
import re
import shutil
import sys
import textwrap
from importlib import metadata
from typing import NoReturn

from kchaos.core.exit_codes import EXIT_BAD_INPUT, MEANINGS
from kchaos.core.suggest import did_you_mean
from kchaos.harness.cli import experiments as cli_experiments
from kchaos.harness.options import COMMON, D, add_run_options, spark_options
from kchaos.harness.terminal import COLORS, UNBOUNDED, is_tty

ABOUT = ("Jepsen-style chaos testing for Apache Kafka: run Kafka clusters under faults, record every operation, "
         "check the history for lost, duplicated and reordered writes, and explain each loss from Kafka's own "
         "files. `kchaos COMMAND --help` describes a command and its options; docs/ has the rest.")

COMMANDS = {
    "run": ("run one test against a fresh cluster",
            "Start a fresh Kafka cluster (Docker containers, or the machines of a hosts file over SSH), write to it "
            "while consumers read and the nemesis injects faults, heal, read every partition back, tear the "
            "cluster down and check the history. The run directory, STORE/NAME/<UTC stamp>/ (STORE/latest points "
            "at it), keeps the history, the results, Kafka's own files and report.html. The exit code is the "
            "verdict. Every option is checked before anything starts."),
    "check": ("check a run, a history.jsonl, or every run below a directory",
              "Check the history of a run directory (or a history.jsonl) with the Spark checkers, write "
              "results.json, rewrite report.html and print the verdict with the counts on stdout. Given a "
              "directory of runs, check them all in one Spark job, write checks.json and checks.csv there and "
              "print one line per run. The exit code is the verdict."),
    "suite": ("run every cell of a suite file, then compare them",
              "Run every cell of a suite file (a matrix of `kchaos run` options, docs/suites.md) as many times as "
              "it says, going on past runs that fail. The suite's directory, STORE/suites/NAME/<UTC stamp>/, gets "
              "every run, compare.csv, compare.html and a JUnit report.xml; the table at the end has one line per "
              "cell. The whole file is checked before anything runs; --dry-run stops there and prints the cells. "
              "--resume continues an interrupted suite run. Last, it lists the regressions since the suite's previous "
              "night: cells that passed then and fail now, and anomaly kinds new to a cell. --shard I/N runs only "
              "shard I of N, for a suite spread over N machines that `kchaos merge` joins again."),
    "merge": ("join the shards of a suite, run on several machines, into one night",
              "Join the shards of one suite night (each made by `kchaos suite FILE --shard I/N`, on this machine "
              "or another) into one night of STORE, STORE/suites/NAME/<stamp of the first shard>/: every run "
              "copied, progress.jsonl, compare.csv, compare.html and report.xml as a whole run of the suite "
              "would have them, and the store's index, so that the suite's trends count it as one night. Each "
              "SOURCE is a store a shard ran in, or its suite night. Every shard must be there once and "
              "finished; nothing is created otherwise. Last, it lists the regressions since the suite's previous "
              "night in STORE, as `kchaos suite` does."),
    "compare": ("compare every run below a directory, one row per configuration",
                "Group the runs below a directory (a suite run, a scenario run, the whole store) by configuration "
                "and write compare.csv and compare.html there, one row per configuration. Runs without "
                "results.json are checked first. A single run directory is refused: it has nothing to compare "
                "with (`kchaos report RUN` rewrites its report)."),
    "report": ("(re)write report.html for a run, or for every run below a directory",
               "Write report.html for a run directory from what it recorded: the verdict, the configuration, the "
               "anomalies with examples, the plots. Given a directory, do it for every run below it."),
    "serve": ("browse a results store on a local web page",
              "Serve a results store on a local web page: every run, suite and scenario with its verdict and its "
              "report. It binds to this machine only unless --host says otherwise."),
    "index": ("bring the results index of a store up to date, or rebuild it",
              "Bring STORE/index.sqlite up to date with the run directories: read again the runs and suite nights "
              "whose files changed, add the new ones, drop the gone. serve, compare and the trend pages query it; "
              "suites update it as they run. The run directories stay the source of truth: --rebuild reads every "
              "one again, and a missing index, or one of another version, is rebuilt by itself."),
    "explain": ("say why each lost write was lost, or each transaction torn, from Kafka's own files",
                "(Re)build RUN/evidence/explanation.json from the Kafka files the run collected "
                "(RUN/evidence/raw), rewrite report.html, and "
                "print why the writes were lost: one sentence per group of lost ranges with one cause, largest "
                "first, or with --all one per range. For a txn run, (re)build RUN/evidence/txn_explanation.json "
                "and print each torn transaction (and G1a, lost_write, aborted_read) with its producer, markers, "
                "coordinator states and cause (docs/evidence.md)."),
    "cleanup": ("remove the containers and networks kchaos made (with --hosts: what it made on those hosts)",
                "Remove every container and network kchaos made, and every fault with them, also after a harness "
                "that was killed. With --hosts, undo kchaos's faults, processes and mounts on those hosts and "
                "remove its directory there instead."),
    "versions": ("list the Kafka versions kchaos can run and which are cached",
                 "Print one line per Kafka release line kchaos runs: the line, its latest patch release (what "
                 "--kafka-version LINE runs), and whether its jars are in ~/.cache/kchaos, with any other cached "
                 "release of the line (docs/versions.md)."),
    "prepare": ("fetch the Kafka jars, build the node image and archive Spark's classes ahead of a run",
                "Resolve the Kafka jars (cached in ~/.cache/kchaos) and build the node image, so that the first "
                "run does not wait for them; then archive the classes Spark's JVM loads at start (once per java "
                "and Spark, in ~/.cache/kchaos/spark), so that every check starts Spark seconds sooner."),
}


def version() -> str:
    """`kchaos 0.1.0 (Kafka 3.7.2 by default)`: this kchaos and the Kafka a run gets without --kafka-version."""
    try:
        mine = metadata.version("kchaos")
    except metadata.PackageNotFoundError:
        mine = "(not installed)"
    return f"kchaos {mine} (Kafka {D.cluster.kafka_version} by default)"


class HelpFormatter(argparse.HelpFormatter):
    """Help as wide as the terminal, and not wrapped at all off a terminal. Every option says its default. A
    text's paragraphs are filled; its indented lines are kept, wrapped under their own second column."""

    def __init__(self, prog: str) -> None:
        width = shutil.get_terminal_size().columns - 2 if is_tty(sys.stdout) else UNBOUNDED
        super().__init__(prog, max_help_position=32, width=width)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = (action.help or "").replace(" (default: %(default)s)", "")  # BooleanOptionalAction's own, as True/False
        if not action.option_strings or action.default is argparse.SUPPRESS or "default" in text:
            return text
        d = action.default
        shown = "on" if d is True else "off" if d is False else "none" if d is None else \
            f"{d:g}" if isinstance(d, float) else "%(default)s"
        return f"{text} (default: {shown})"

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out: list[str] = []
        for para in text.split("\n\n"):
            lines: list[str] = []
            prose: list[str] = []
            for line in para.splitlines() + [" "]:  # the sentinel ends the last run of prose
                if line.startswith(" "):
                    if prose:
                        lines.append(textwrap.fill(" ".join(" ".join(prose).split()), width, initial_indent=indent,
                                                   subsequent_indent=indent))
                        prose = []
                    if line.strip():
                        lines.append(_hanging(line, width, indent))
                else:
                    prose.append(line)
            out.append("\n".join(lines))
        return "\n\n".join(out)


def _hanging(line: str, width: int, indent: str) -> str:
    lead = re.match(r"\s*\S+\s+", line)
    return textwrap.fill(line, width, initial_indent=indent,
                         subsequent_indent=indent + " " * (lead.end() if lead else 0))


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose help uses HelpFormatter and whose errors are one line and exit code 3 (argparse's
    own 2 would read as "unknown"), suggesting the name meant for a mistyped choice. An option is taken only by
    its whole name: a prefix is an unrecognized argument, with the option probably meant."""

    commands: dict[str, argparse.ArgumentParser]
    brief: frozenset[str] | None = None  # when set, the options --help shows; --help-all shows every one

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs.setdefault("allow_abbrev", False)  # `--ack 1` is a mistake to name, not --acks to guess
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def format_help(self) -> str:
        """The help; with `brief` set, only those options and their groups' titles, then how to see the rest."""
        if self.brief is None:
            return super().format_help()
        hidden = [a for a in self._actions if a.option_strings and a.help != argparse.SUPPRESS
                  and not set(a.option_strings) & self.brief and not isinstance(a, (argparse._HelpAction, _HelpAll))]
        saved = [(a, a.help) for a in hidden] + [(g, g.description) for g in self._action_groups]
        for a in hidden:
            a.help = argparse.SUPPRESS
        for g in self._action_groups:
            g.description = None
        try:
            text = super().format_help()
        finally:
            for x, about in saved:
                if isinstance(x, argparse.Action):
                    x.help = about
                else:
                    x.description = about
        return text.rstrip("\n") + f"\n\n{len(hidden)} more options, in the same groups: {self.prog} --help-all\n"

    def format_full_help(self) -> str:
        """The help with every option, each group with its description."""
        return super().format_help()

    def error(self, message: str) -> NoReturn:
        """Print `kchaos: error: MESSAGE` (with a "did you mean" for a mistyped choice) and exit 3."""
        bad = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if bad:
            known = re.findall(r"'([^']*)'", bad.group(2))
            hint = did_you_mean(bad.group(1), known)
            message = message[:bad.start()] + f"invalid choice: {bad.group(1)!r}" + \
                (hint or f" (choose from {', '.join(known)})")
        print(f"kchaos: error: {message}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


class _HelpAll(argparse.Action):
    """--help-all: print the help with every option and exit."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, argparse.SUPPRESS, nargs=0, default=argparse.SUPPRESS,
                         help="show every option, not only the common ones, and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        print(parser.format_full_help() if isinstance(parser, Parser) else parser.format_help(), end="")
        parser.exit()


def unrecognized(parser: Parser, command: str | None, extra: list[str]) -> str:
    """The error for arguments no option of `command` took, with the option probably meant."""
    sub = parser.commands.get(command or "", parser)
    known = [s for a in sub._actions for s in a.option_strings if s.startswith("--")]
    hints = [did_you_mean(x.split("=", 1)[0], known) for x in extra if x.startswith("--")]
    return f"unrecognized arguments: {' '.join(extra)}{next((h for h in hints if h), '')}"


def _output_options(p: argparse.ArgumentParser | argparse._ArgumentGroup, top: bool) -> None:
    """--color and --quiet, given before the command or after it (where they must not reset the first)."""
    p.add_argument("--color", choices=COLORS, default="auto" if top else argparse.SUPPRESS,
                   help="auto: colour on a terminal unless NO_COLOR is set; always: in files and pipes too; "
                        "never (default: auto)")
    p.add_argument("-q", "--quiet", action="store_true", default=False if top else argparse.SUPPRESS,
                   help="print only the verdict lines: no progress, no steps (default: off)")


def _exit_codes() -> str:
    return "exit codes:\n" + "\n".join(f"  {code:<5}{meaning}" for code, meaning in MEANINGS)


def build_parser() -> Parser:
    """The argument parser of `kchaos` and every subcommand; `.commands` holds each subcommand's parser."""
    p = Parser(prog="kchaos", description=ABOUT, epilog=_exit_codes())
    p.add_argument("--version", action="version", version=version(), help="print kchaos's version and the "
                   "Kafka version a run gets by default, and exit")
    _output_options(p, top=True)
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=Parser, metavar="COMMAND", title="commands")

    def command(name: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=COMMANDS[name][0], description=COMMANDS[name][1])

    run = command("run")
    run.usage = "kchaos run [OPTIONS]"
    groups = add_run_options(run)
    run.add_argument("--help-all", action=_HelpAll)
    run.add_argument("--dry-run", action="store_true", help="check the options and print the cluster, the clients "
                     "and every fault of the schedule with its time; start nothing, create nothing")
    if isinstance(run, Parser):
        run.brief = COMMON
    c = command("check")
    c.add_argument("path", help="a run directory, a history.jsonl, or a directory with runs below it")
    c.add_argument("--json", action="store_true", help="print the verdict, counts and reasons as JSON instead of "
                   "the summary: results.json without its per-second timeline and per-checker details (for a "
                   "directory of runs, a row per run)")
    c.add_argument("--full", action="store_true", help="with --json: the whole results object, as results.json "
                   "holds it")
    spark_options(c)
    s = command("suite")
    s.add_argument("file", help="suite YAML file (see suites/ and docs/suites.md)")
    s.add_argument("--dry-run", action="store_true", help="check the file and print the cells it would run, with "
                   "their seeds; start nothing, create nothing")
    s.add_argument("--resume", action="store_true", help="continue the newest interrupted run of this suite")
    s.add_argument("--seed", type=int, default=None, help="suite seed (default: the file's, else random)")
    s.add_argument("--store", default=D.store, help="results root (the suite goes in STORE/suites/NAME/)")
    s.add_argument("--fail-on-regression", action="store_true", help="exit 6 when a cell regressed since the "
                   "suite's previous night (passed then and fails now, or shows an anomaly kind new to it)")
    s.add_argument("--hosts", default=None, metavar="FILE", help="run every cell on the machines of this hosts "
                   "file over SSH, docs/hosts.md (default: Docker containers on this machine)")
    s.add_argument("--shard", default=None, metavar="I/N", help="run only shard I of N: the repetitions at places "
                   "I, I+N, I+2N ... of the whole suite's order, with the seeds a whole run gives them (the "
                   "suite's seed must be fixed: the file's, or --seed); `kchaos merge` joins the N shards "
                   "(default: the whole suite)")
    spark_options(s)
    m = command("merge")
    m.add_argument("sources", nargs="+", metavar="SOURCE", help="a store a shard ran in (its suites/NAME/<stamp>/), "
                   "or that suite night's directory")
    m.add_argument("--store", default=D.store, help="results root the merged night goes in "
                   "(STORE/suites/NAME/<stamp>/)")
    m.add_argument("--fail-on-regression", action="store_true", help="exit 6 when a cell regressed since the "
                   "suite's previous night in STORE")
    cmp_ = command("compare")
    cmp_.add_argument("path", help="a directory with runs below it: a suite or scenario run, or the whole store")
    cmp_.add_argument("--spark-master", default=D.spark_master, help="where runs not yet checked are checked")
    command("report").add_argument("path", help="a run directory, or a directory with runs below it")
    sv = command("serve")
    sv.add_argument("--store", default=D.store, help="results root to serve")
    sv.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    sv.add_argument("--port", type=int, default=8000, help="port to listen on")
    sv.add_argument("--warm-check", action="store_true", help="also keep a Spark session warm and check, on it, "
                    "the runs below the store that `kchaos check RUN` is given (a Unix socket in the store, its "
                    "owner's only): a check of a demo run answers in about two seconds instead of ten, Spark's start "
                    "paid once")
    spark_options(sv)
    ix = command("index")
    ix.add_argument("--store", default=D.store, help="results root whose index.sqlite to update")
    ix.add_argument("--rebuild", action="store_true", help="read every run and suite night again and replace the "
                    "index's rows in one transaction")
    cli_experiments.add_parsers(sub)
    ex = command("explain")
    ex.add_argument("run", help="a run directory")
    ex.add_argument("--all", action="store_true", help="print one sentence per lost range instead of one per group "
                                                       "of ranges with one cause (default: groups)")
    cl = command("cleanup")
    cl.add_argument("--hosts", default=None, metavar="FILE",
                    help="a hosts file: clean up those hosts instead of this machine's Docker (default: Docker)")
    command("versions")
    pr = command("prepare")
    pr.add_argument("--kafka-version", default=D.cluster.kafka_version, help="the Kafka release to fetch: a line "
                    "(its latest patch) or an exact release")
    pr.add_argument("--kafka-dist", default=None, metavar="PATH", help="an extracted Kafka directory or .tgz to "
                    "use instead (default: KAFKA_HOME if set, else the jars fetched with Maven)")
    pr.add_argument("--base-image", default=None, metavar="IMAGE", help="an existing image to build the node image "
                    "on (default: a Debian 12 base made with mmdebstrap)")
    pr.add_argument("--upgrade-to", default=None, metavar="VERSION", help="also prepare a rolling upgrade to "
                    "VERSION (as `kchaos run --nemesis upgrade --upgrade-to`): its jars, and their class archive for "
                    "the node image's nodes")
    which = pr.add_mutually_exclusive_group()
    which.add_argument("--checker-only", action="store_true", help="only archive Spark's start-up classes for the "
                       "checker (no Kafka jars, no node image)")
    which.add_argument("--no-checker", action="store_true", help="leave Spark's class archive to another step "
                       "(make test makes it beside the node image)")
    for name, parser in sub.choices.items():
        _output_options(groups["output"] if name == "run" else parser, top=False)
    p.commands = dict(sub.choices)
    return p
