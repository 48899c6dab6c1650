"""The share workload's members on Kafka's Java client, in one JVM (`KchaosShareMembers`, workloads/java/share/).

`ShareMembers` starts the JVM, gives it the run's spec and relays its two steps: `stop` (the members close and
leave the group) and `drain` (fresh members of the group accept everything still available until the group's lag
is 0, then the group's state is recorded). The JVM records every op in `history.parts/java-share.jsonl` on the
history's clock; the harness merges it into history.jsonl after the run (`core.send_stream.merge_streams`).
When the harness dies, the JVM sees its stdin end, writes out what it recorded and exits.
"""
from __future__ import annotations

import json
import logging
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

from kchaos.core.send_stream import PARTS_DIR
from kchaos.workloads.java_build import JavaProgram
from kchaos.workloads.java_client import TERM_S, end_jvm

log = logging.getLogger("kchaos.workload")
PART = "java-share.jsonl"


class ShareMembersError(RuntimeError):
    """The share members could not start (the group's configuration was refused, or the JVM did not answer)."""


class ShareMembers:
    """The share group's member processes `members`, then its drainer processes `drainers`, in one JVM."""

    def __init__(self, program: JavaProgram, spec: dict[str, Any], run_dir: Path):
        self.program = program
        self.spec = spec
        self.parts = Path(run_dir) / PARTS_DIR
        self._proc: subprocess.Popen[str] | None = None
        self._said: queue.Queue[dict[str, Any]] = queue.Queue()
        self._readers: list[threading.Thread] = []
        self.polled = 0  # records delivered to the members so far, as the JVM last printed (at most 200 ms old)

    def start(self, timeout: float = 90.0) -> None:
        """Start the JVM and hand it the spec; its members join the group and poll at once."""
        self.parts.mkdir(exist_ok=True)
        command = self.program.share_command()
        self._proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, bufsize=1)
        log.info("share members started (pid %d, kafka-clients %s): %s", self._proc.pid,
                 self.program.clients_version, " ".join(command))
        self._write(json.dumps({**self.spec, "path": str(self.parts / PART)}, separators=(",", ":")))
        self._readers = [threading.Thread(target=f, name=f"share-members-{n}", daemon=True)
                         for f, n in ((self._read_out, "out"), (self._read_log, "err"))]
        for t in self._readers:
            t.start()
        said = self._await("ready", timeout)
        if said is None or not said.get("ready"):
            self.close()
            raise ShareMembersError((said or {}).get("error") or f"the share members were not ready in {timeout:g} s")

    def _write(self, line: str) -> bool:
        try:
            assert self._proc is not None and self._proc.stdin is not None
            self._proc.stdin.write(line + "\n")
            self._proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, AssertionError):
            return False

    def _read_out(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                said = json.loads(line)
            except ValueError:
                log.warning("share members: not a JSON line: %r", line[:500])
                continue
            if "polled" in said:
                self.polled = int(said["polled"])
            else:
                self._said.put(said)

    def _read_log(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        for line in self._proc.stderr:
            log.info("%s", line.rstrip())

    def _await(self, key: str, timeout: float) -> dict[str, Any] | None:
        """The JVM's next line saying `key`, or an error; None after `timeout` seconds of neither."""
        try:
            while True:
                said = self._said.get(timeout=timeout)
                if said.get(key) or "error" in said:
                    return said
        except queue.Empty:
            return None

    def crash(self, process: int, restart_after: float) -> bool:
        """Have member `process` crash at its next step (its consumer left unclosed) and a new consumer of the same
        process start `restart_after` seconds later; whether the JVM was told."""
        return self._proc is not None and self._write(f"crash {process} {int(restart_after * 1000)}")

    def stop(self, timeout: float) -> None:
        """Have every member finish its step, close and leave the group; wait up to `timeout` for that."""
        if self._proc is None or not self._write("stop"):
            return
        if self._await("stopped", timeout) is None:
            log.warning("the share members did not stop in %g s", timeout)

    def drain(self, timeout: float) -> dict[str, Any] | None:
        """Run the drainers until the group's lag is 0 everywhere or `timeout` seconds pass, record the group's state
        and end the JVM; the state (partition -> start, end, lag), None when it was not read."""
        if self._proc is None:
            return None
        said = self._await("done", timeout + 60) if self._write(f"drain {int(timeout * 1000)}") else None
        self._end()
        return (said or {}).get("partitions")

    def _end(self) -> None:
        assert self._proc is not None
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        end_jvm(self._proc, TERM_S)
        for t in self._readers:
            t.join(5)
        log.info("share members exited with %s", self._proc.returncode)
        self._proc = None

    def close(self) -> None:
        """End the JVM if it still runs (an interrupted run); what it recorded is written out."""
        if self._proc is not None:
            self._end()
