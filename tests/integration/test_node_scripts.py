"""kafka-ctl and fault-ctl (clusters/node/) on an SSH host, installed into one directory kchaos owns,
driven over SSH as the SSH backend drives them: they touch only what kchaos made there.

The host (tests/integration/ssh_hosts.py) has no Kafka jars: `java` is a stand-in with the JVM's
command line that sleeps, which is all the scripts look at. Beside kchaos's own things the host
holds the operator's: a Kafka of theirs, a lazyfs on the node image's FIFO path, a rule in INPUT,
for a while a root qdisc. Every check that kchaos leaves them alone looks at those.
"""
from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from ssh_hosts import SshHosts, ssh_hosts

from kchaos.clusters.lazyfs import build as build_lazyfs
from kchaos.clusters.remote import Result
from kchaos.clusters.remote_ssh import SshPool, SshRemote, to_remote
from kchaos.core.hosts import load_hosts

pytestmark = pytest.mark.beside

NODE_DIR = Path(__file__).resolve().parents[2] / "clusters" / "node"
SCRIPTS = ("kafka-ctl", "fault-ctl", "log4j.properties", "log4j-tools.properties")
ROOT = "/opt/kchaos-node"
BIN, CONF, DATA, RUN, LIBS = (f"{ROOT}/{d}" for d in ("bin", "conf", "data", "run", "libs"))
FAKE_JAVA = f"{ROOT}/test/java"
# Not ssh_hosts' default subnet: test_ssh_hosts may run beside this module.
SUBNET = "172.30.79.0/24"
NODE_ENV = f"""\
export KCHAOS_LIBS={LIBS}
export KCHAOS_CONF={CONF}
export KCHAOS_DATA={DATA}
export KCHAOS_RUN={RUN}
export KCHAOS_CONTROL_PORT=22
export KCHAOS_DEV=eth0
export KCHAOS_STORAGE=lazyfs
export KCHAOS_JIT=c1
export JAVA={FAKE_JAVA}
"""
# What kafka-ctl runs as `java`: a process with the JVM's command line (kafka-ctl and fault-ctl
# find Kafka by it) that sleeps. SIGSTOP, SIGCONT and SIGKILL do to it what they do to a JVM.
FAKE_JAVA_SCRIPT = '#!/bin/bash\nexec -a "java $*" sleep 1000\n'
# The operator's own things on the host, which kchaos must never touch.
USER_KAFKA = "java -cp /usr/share/kafka/libs/* kafka.Kafka /etc/kafka/server.properties"
USER_LAZYFS = "/opt/kchaos/lazyfs --ctl=/run/lazyfs.ctl --log=/kchaos/lazyfs.log /srv/backing /srv/data"
USER_RULE = ["INPUT", "-s", "192.0.2.7", "-p", "tcp", "--dport", "7", "-m", "comment", "--comment",
             "operator-rule", "-j", "DROP"]
HANDLE = "4b43:"
# pgrep patterns are written so as not to match themselves: the sudo and timeout processes that
# run pgrep hold the pattern in their own command lines.
LOOP = f"{BIN}/fault-ctl [c]pu-loop"


@dataclass
class Node:
    hosts: SshHosts
    remote: SshRemote
    address: str
    user_pids: dict[str, int]

    def sh(self, cmd: list[str] | str, *, check: bool = True, timeout: float = 30) -> Result:
        """Run `cmd` as root on the host."""
        return self.remote.run(cmd, timeout=timeout, check=check, sudo=True)

    def fault(self, *args: str, check: bool = True) -> Result:
        return self.sh([f"{BIN}/fault-ctl", *args], check=check, timeout=60)

    def kafka(self, *args: str, check: bool = True) -> Result:
        return self.sh([f"{BIN}/kafka-ctl", *args], check=check, timeout=60)

    def spawn(self, cmdline: str) -> int:
        """A detached `sleep` whose command line reads `cmdline`; its pid. (The wrapper that holds
        `cmdline` in its own arguments has exited when this returns.)"""
        out = self.sh(["setsid", "bash", "-c", 'exec -a "$0" sleep 1000 </dev/null >/dev/null 2>&1 & echo $!',
                       cmdline]).stdout
        return int(out)

    def cpu_loops(self) -> list[str]:
        """The pids of fault-ctl's CPU loops: each loop process, not the subshells it forks for a moment (`$(pgrep
        ...)`), which carry the loop's command line too."""
        rows = [r.split(None, 2) for r in self.sh(["ps", "-eo", "pid=,ppid=,args="]).stdout.splitlines()]
        matching = {pid: ppid for pid, ppid, *args in rows if args and re.search(LOOP, args[0])}
        return [pid for pid, ppid in matching.items() if ppid not in matching]

    def states(self, pids: list[int], samples: int = 1, every: float = 0.0) -> list[str]:
        """ps's state letter of each pid, `samples` times `every` seconds apart: one string per pid
        (a letter per sample, '-' while it does not exist)."""
        ids = " ".join(map(str, pids))
        loop = (f"for i in $(seq {samples}); do for p in {ids}; do "
                f"s=$(ps -o stat= -p $p) && printf %.1s $s || printf -; done; echo; sleep {every}; done")
        rows = self.sh(loop, timeout=30 + samples * every).stdout.split()
        return ["".join(row[i] for row in rows) for i in range(len(pids))]

    def our_kafka(self) -> int:
        """The pid of kchaos's (stand-in) Kafka on the host, started if need be."""
        self.kafka("start")
        for _ in range(50):  # kafka-ctl returns as soon as it has started it in the background
            out = self.sh(["pgrep", "-f", f"kafka\\.Kafka {CONF}/server\\.properties"], check=False).stdout.split()
            if out:
                break
            time.sleep(0.05)
        assert len(out) == 1, out
        return int(out[0])

    def root_qdisc(self) -> str:
        """The kind and handle of eth0's root qdisc: `noqueue 0:`."""
        return " ".join(self.sh("tc qdisc show dev eth0 root").stdout.split()[1:3])

    def iptables(self, chain: str) -> list[str]:
        return self.sh(["iptables", "-w", "-S", chain]).stdout.splitlines()

    def reaches(self, port: int) -> str:
        """From the harness: `refused` (the host answered), `dropped` (silence) or `open`."""
        try:
            with socket.create_connection((self.address, port), timeout=1.5):
                return "open"
        except ConnectionRefusedError:
            return "refused"
        except TimeoutError:
            return "dropped"


def _install(r: SshRemote) -> None:
    """The node scripts, lazyfs, node.env and the stand-in java in ROOT, owned by root."""
    stage = "/tmp/kchaos-stage"
    r.run(["mkdir", "-p", stage], timeout=10, check=True)
    files = {name: NODE_DIR / name for name in SCRIPTS}
    files["lazyfs"] = build_lazyfs()
    for name, path in files.items():
        r.put(path, f"{stage}/{name}")
    r.run(["sh", "-c", 'cat > "$1"', "sh", f"{stage}/node.env"], stdin=NODE_ENV.encode(), timeout=10, check=True)
    r.run(["sh", "-c", 'cat > "$1"', "sh", f"{stage}/java"], stdin=FAKE_JAVA_SCRIPT.encode(), timeout=10, check=True)
    r.run(f"mkdir -p {BIN} {CONF} {DATA} {RUN} {LIBS} {ROOT}/test && cp {stage}/java {FAKE_JAVA} && "
          f"rm {stage}/java && cp {stage}/* {BIN}/ && chmod 755 {FAKE_JAVA} {BIN}/kafka-ctl {BIN}/fault-ctl "
          f"{BIN}/lazyfs && chown -R root:root {ROOT} && touch {CONF}/server.properties && rm -r {stage}",
          timeout=30, check=True, sudo=True)


@pytest.fixture(scope="module")
def node() -> Iterator[Node]:
    with ssh_hosts(1, subnet=SUBNET) as hosts:
        hf = load_hosts(hosts.hosts_file)
        pool = SshPool()
        try:
            r = to_remote(hf.host("n1"), hf, pool=pool)
            _install(r)
            n = Node(hosts, r, hosts.addresses["n1"], {})
            n.user_pids = {"kafka": n.spawn(USER_KAFKA), "lazyfs": n.spawn(USER_LAZYFS)}
            n.sh(["iptables", "-w", "-A", *USER_RULE])
            yield n
        finally:
            pool.close_all()


def _alive(states: str) -> bool:
    """Every sample shows the process there and not stopped: sleeping (S, D) or, woken at that moment, running (R)."""
    return bool(states) and set(states) <= set("RSD")


def _user_things_intact(node: Node) -> None:
    """The operator's Kafka and lazyfs run (not stopped), and their INPUT rule is still there."""
    assert all(map(_alive, node.states(list(node.user_pids.values()), samples=3, every=0.05)))
    assert [r for r in node.iptables("INPUT") if "-s 192.0.2.7/32" in r and "--comment operator-rule -j DROP" in r]


def test_kafka_ctl_runs_kafka_from_the_layout_in_node_env(node: Node):
    node.kafka("kill", check=False)
    assert node.kafka("status", check=False).exit_code == 3
    started = node.kafka("start").stdout
    assert started.startswith("started "), started
    pid = node.our_kafka()
    cmdline = node.sh(["cat", f"/proc/{pid}/cmdline"]).stdout.split("\0")
    assert cmdline[0].split()[-2:] == ["kafka.Kafka", f"{CONF}/server.properties"], cmdline
    args = cmdline[0].split()
    for arg in (f"-Dlog4j.configuration=file:{BIN}/log4j.properties", f"-Dkafka.logs.dir={CONF}",
                "-XX:TieredStopAtLevel=1"):  # KCHAOS_JIT=c1
        assert arg in args, (arg, cmdline)
    assert all(jar.startswith(f"{LIBS}/") for jar in args[args.index("-cp") + 1].split(":")), cmdline  # its jars
    assert node.kafka("start").stdout.strip() == "already running"
    assert "=== start " in node.sh(["cat", f"{CONF}/stdout.log"]).stdout
    # KCHAOS_STORAGE=lazyfs: the data directory is our lazyfs, with its FIFO in KCHAOS_RUN.
    status = node.fault("status").stdout
    assert f"mount lazyfs {DATA}/data fuse.lazyfs" in status, status
    assert "process lazyfs " in status and f"process kafka {pid}" in status, status
    assert node.sh(["test", "-p", f"{RUN}/lazyfs.ctl"], check=False).ok
    assert node.fault("disk-delay", "5", "0").ok
    assert '"write_delay_ms": 5' in node.fault("status").stdout
    assert node.kafka("pause").ok and node.states([pid]) == ["T"]
    # resumed: no longer stopped; sleeping, or still running the instant after SIGCONT on a busy machine
    assert node.kafka("resume").ok and node.states([pid])[0] in ("S", "R")
    assert node.kafka("kill").stdout.strip() == "killed"
    assert node.kafka("status", check=False).exit_code == 3
    _user_things_intact(node)


def test_dropping_the_harness_address_leaves_its_ssh_connection(node: Node):
    harness = node.remote.run("echo $SSH_CONNECTION", timeout=10, check=True).stdout.split()[0]
    assert node.reaches(9999) == "refused"  # nothing listens there: the host answers with a reset
    node.fault("drop", "test", harness)
    assert node.reaches(9999) == "dropped"  # the rule works...
    assert node.remote.run(["true"], timeout=10).ok  # ...and the open connection goes on
    hf = load_hosts(node.hosts.hosts_file)
    fresh = to_remote(hf.host("n1"), hf, pool=SshPool(), connect_timeout=5)
    assert fresh.run(["hostname"], timeout=10).stdout.strip() == "n1"  # so does a new one
    fresh.close()
    rules = node.iptables("KCHAOS")
    assert rules == ["-N KCHAOS",
                     "-A KCHAOS -p tcp -m tcp --dport 22 -m comment --comment kchaos-control -j RETURN",
                     f"-A KCHAOS -s {harness}/32 -m comment --comment test -j DROP"], rules
    assert node.iptables("INPUT")[1] == "-A INPUT -j KCHAOS"  # first, before the operator's rule
    # However the drop rules go, the control rule stays first.
    node.fault("net-heal", "test")
    node.fault("drop", "test", harness)
    node.fault("net-heal")
    assert node.iptables("KCHAOS") == rules[:2]
    assert node.reaches(9999) == "refused"
    node.fault("drop", "test", harness)
    node.fault("heal")
    assert node.iptables("KCHAOS") == rules[:2]
    _user_things_intact(node)


def test_shape_only_replaces_a_default_root_qdisc_and_removes_only_its_own(node: Node):
    default = node.root_qdisc()
    assert default.endswith(" 0:"), default  # the kernel's (noqueue on a veth)
    assert node.fault("shape", "1mbit").ok
    assert node.root_qdisc() == f"htb {HANDLE}"
    assert node.fault("shape", "2mbit").ok  # its own is replaced
    assert "rate 2Mbit" in node.sh("tc class show dev eth0").stdout
    assert node.fault("unshape").ok
    assert node.root_qdisc() == default
    node.sh("tc qdisc add dev eth0 root tbf rate 100mbit burst 32kbit latency 400ms")
    try:
        tbf = node.root_qdisc()
        assert tbf.startswith("tbf ")
        refused = node.fault("shape", "1mbit", check=False)
        assert refused.exit_code == 3
        assert refused.stdout.splitlines() == [f"eth0 has a root qdisc kchaos did not make ({tbf}): not shaping"]
        for undo in ("unshape", "heal"):
            node.fault(undo)
            assert node.root_qdisc() == tbf, undo
    finally:
        node.sh("tc qdisc del dev eth0 root")
    assert node.root_qdisc() == default


def test_cpu_starves_our_kafka_with_a_duty_cycle_and_uncpu_lets_it_run(node: Node):
    pid = node.our_kafka()
    user = node.user_pids["kafka"]
    assert node.fault("cpu", "0.2").ok
    loops = node.cpu_loops()
    assert len(loops) == 1 and node.sh(["cat", f"{RUN}/kchaos-cpu.pid"]).stdout.split() == loops
    # 60 samples: each finds Kafka running with odds of about a fifth, so missing it every time is a one in
    # a million chance, however the machine's load stretches the loop.
    ours, theirs = node.states([pid, user], samples=60, every=0.03)
    assert "T" in ours and _alive(ours.replace("T", "")), ours  # stopped mostly, running a fifth of the time
    assert _alive(theirs), theirs
    assert node.fault("cpu", "0.5").ok  # a new share replaces the loop
    again = node.cpu_loops()
    assert len(again) == 1 and again != loops
    assert node.fault("uncpu").stdout.strip() == "cpu unlimited"
    assert node.cpu_loops() == []
    assert node.sh(["test", "-e", f"{RUN}/kchaos-cpu.pid"], check=False).exit_code == 1
    assert _alive(node.states([pid], samples=5, every=0.05)[0])
    assert node.fault("uncpu").ok  # idempotent, and a paused Kafka stays paused when there is no loop
    node.kafka("pause")
    node.fault("uncpu")
    node.fault("heal")
    assert node.states([pid]) == ["T"]
    node.kafka("resume")
    _user_things_intact(node)


def test_a_pause_holds_while_the_cpu_loop_runs_and_a_restart_is_starved_not_frozen(node: Node):
    pid = node.our_kafka()
    assert node.fault("cpu", "0.5").ok
    assert node.kafka("pause").ok
    # The loop SIGCONTs Kafka every 100 ms; while kafka-ctl's pause is in force it must not.
    assert node.states([pid], samples=30, every=0.03) == ["T" * 30]
    node.fault("uncpu")
    assert node.states([pid], samples=5, every=0.05) == ["T" * 5]  # nor does ending the loop
    assert node.kafka("resume").ok and _alive(node.states([pid], samples=5, every=0.05)[0])
    # Killed while paused and started again, a new Kafka is starved by the loop, not held stopped.
    assert node.fault("cpu", "0.5").ok
    node.kafka("pause")
    node.kafka("kill")
    fresh = node.our_kafka()
    ours = node.states([fresh], samples=40, every=0.03)[0]
    assert "T" in ours and _alive(ours.replace("T", "")), ours
    node.fault("uncpu")
    assert _alive(node.states([fresh], samples=5, every=0.05)[0])
    assert node.sh(["test", "-e", f"{RUN}/kchaos-paused"], check=False).exit_code == 1
    _user_things_intact(node)


def test_cleanup_removes_everything_of_kchaos_and_nothing_else(node: Node):
    pid = node.our_kafka()
    harness = node.remote.run("echo $SSH_CONNECTION", timeout=10, check=True).stdout.split()[0]
    node.fault("drop", "test", harness, "192.0.2.99")
    node.fault("shape", "1mbit")
    node.fault("disk-delay", "5", "0")
    node.fault("cpu", "0.2")
    assert node.states([pid], samples=10, every=0.03)[0].count("T") > 0  # the loop is under way
    lazyfs = node.sh(["pgrep", "-f", f"[-]-ctl={RUN}/lazyfs[.]ctl"]).stdout.split()
    loop = node.sh(["cat", f"{RUN}/kchaos-cpu.pid"]).stdout.strip()
    out = node.fault("cleanup").stdout.splitlines()
    assert out == [f"stopped cpu loop {loop}",
                   f"killed kafka {pid}",
                   f"killed lazyfs {' '.join(lazyfs)}",
                   f"unmounted {DATA}/data",
                   "removed jump INPUT -> KCHAOS",
                   "removed chain KCHAOS (3 rules)",
                   f"removed qdisc htb {HANDLE} from eth0"], out
    assert node.remote.run(["true"], timeout=10).ok
    # Nothing of kchaos is left: no chain, no jump, no qdisc, no process, no mount...
    assert node.sh(["iptables", "-w", "-S", "KCHAOS"], check=False).exit_code != 0
    assert not [r for r in node.iptables("INPUT") if "KCHAOS" in r]
    assert not node.root_qdisc().startswith("htb")
    assert node.sh(["pgrep", "-f", "[/]" + ROOT[1:]], check=False).stdout == ""
    assert ROOT not in node.sh(["cat", "/proc/mounts"]).stdout
    status = node.fault("status").stdout
    assert not [line for line in status.splitlines()
                if line.startswith(("process", "mount", "-A INPUT -j KCHAOS", "-N KCHAOS"))], status
    # ...and everything of the operator's is: their Kafka, their lazyfs, their rule.
    _user_things_intact(node)
    again = node.fault("cleanup")
    assert again.stdout.splitlines() == ["nothing to clean up"]
    # A root qdisc of the operator's is not kchaos's to remove either.
    node.sh("tc qdisc add dev eth0 root tbf rate 100mbit burst 32kbit latency 400ms")
    try:
        assert node.fault("cleanup").stdout.splitlines() == ["nothing to clean up"]
        assert node.root_qdisc().startswith("tbf ")
    finally:
        node.sh("tc qdisc del dev eth0 root")
    # What the SSH backend does next: the directory goes, nothing holds it.
    node.sh(["rm", "-rf", "--one-file-system", ROOT])
    assert node.sh(["test", "-e", ROOT], check=False).exit_code == 1
