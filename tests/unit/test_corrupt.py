"""`fault-ctl corrupt` and `uncorrupt` (clusters/node/fault-ctl) on segment files written here in Kafka's v2
record batch layout, checked by Kafka's own DumpLogSegments: which bytes are flipped, that the choice follows
the seed, that the heal puts the file back byte for byte, and that it leaves alone what Kafka rewrote."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from kchaos import nemesis
from kchaos.core.cache import cache_dir
from kchaos.core.config import NemesisConfig, TestConfig, TopicConfig
from kchaos.evidence.kafka_logs import dump_class_of

FAULT_CTL = Path(__file__).resolve().parents[2] / "clusters" / "node" / "fault-ctl"
HEADER = 61  # bytes of a v2 batch header, records after


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum of a v2 record batch."""
    c = 0xFFFFFFFF
    for b in data:
        c = CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def varint(n: int) -> bytes:
    """Kafka's zigzag varint."""
    z, out = (n << 1) ^ (n >> 63), bytearray()
    z &= (1 << 64) - 1
    while z >= 0x80:
        out.append(z & 0x7F | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


@dataclass
class Written:
    """Where things landed in a written segment: per data batch (base, last, start, end), the file ranges of
    each record's value with its offset, and the control batches' ranges."""

    batches: list[tuple[int, int, int, int]]
    values: list[tuple[int, int, int]]  # (start, end, offset)
    controls: list[tuple[int, int]]
    compressed: list[tuple[int, int]]


def record(delta: int, value: bytes, key: bytes | None = None) -> tuple[bytes, int]:
    """One record and where its value starts within it."""
    head = bytes([0]) + varint(0) + varint(delta) + (varint(-1) if key is None else varint(len(key)) + key)
    body = head + varint(len(value))
    at = len(body)
    body += value + varint(0)
    n = varint(len(body))
    return n + body, len(n) + at


def batch(base: int, records: list[bytes], *, control: bool = False, codec: int = 0,
          key: bytes | None = None) -> tuple[bytes, list[tuple[int, int, int]]]:
    """A v2 batch at offset `base`, and its records' value ranges relative to the batch start."""
    raw, spans, pos = b"", [], 0
    for i, v in enumerate(records):
        r, at = record(i, v, key)
        spans.append((pos + at, pos + at + len(v), base + i))
        raw += r
        pos += len(r)
    body = gzip.compress(raw) if codec == 1 else raw
    attrs = codec | (0x20 if control else 0)
    after_crc = struct.pack(">hiqqqhii", attrs, len(records) - 1, 1_700_000_000_000, 1_700_000_000_000,
                            -1, -1, -1, len(records)) + body
    rest = struct.pack(">ibI", 0, 2, crc32c(after_crc)) + after_crc
    out = struct.pack(">qi", base, len(rest)) + rest
    return out, [(HEADER + a, HEADER + b, o) for a, b, o in spans] if codec == 0 else []


def write_segment(path: Path) -> Written:
    """Six data batches of one to three records, a control batch and a gzip batch, as the test topic holds."""
    data, w, off = b"", Written([], [], [], []), 0
    parts = [("d", [b"1001"]), ("d", [b"1002", b"1003"]), ("c", [b"\x00\x00\x00\x00\x00\x00"]),
             ("d", [b"1004", b"1005", b"1006"]), ("z", [b"2001", b"2002"]), ("d", [b"1007"]),
             ("d", [b"1008", b"1009"]), ("d", [b"1010"])]
    for kind, values in parts:
        b, spans = batch(off, values, control=kind == "c", codec=1 if kind == "z" else 0,
                         key=b"\x00\x00\x00\x01" if kind == "c" else None)
        start, end = len(data), len(data) + len(b)
        if kind == "c":
            w.controls.append((start, end))
        else:
            w.batches.append((off, off + len(values) - 1, start, end))
            w.values += [(start + a, start + e, o) for a, e, o in spans]
            if kind == "z":
                w.compressed.append((start, end))
        data += b
        off += len(values)
    path.write_bytes(data)
    return w


@pytest.fixture
def part(tmp_path):
    """A partition directory with one closed segment (offsets 0..11) and the active one (from 12)."""
    d = tmp_path / "kchaos-0"
    d.mkdir()
    w = write_segment(d / "00000000000000000000.log")
    batch_bytes, _ = batch(12, [b"3001"])
    (d / "00000000000000000012.log").write_bytes(batch_bytes)
    return d, w


def ctl(tmp_path: Path, *args: str) -> dict:
    env = {**os.environ, "KCHAOS_RUN": str(tmp_path / "run"), "KCHAOS_DATA": str(tmp_path / "nodata")}
    p = subprocess.run([str(FAULT_CTL), *args], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_corrupt_flips_one_bit_of_a_value_in_distinct_data_batches_of_the_closed_segment(tmp_path, part):
    d, w = part
    seg = d / "00000000000000000000.log"
    before, active = seg.read_bytes(), (d / "00000000000000000012.log").read_bytes()
    out = ctl(tmp_path, "corrupt", str(d), "7", "3")
    after = seg.read_bytes()
    assert out["segment"] == seg.name and out["closed_segments"] == 1 and out["size"] == len(before)
    assert (d / "00000000000000000012.log").read_bytes() == active  # the active segment is never touched
    changed = [i for i in range(len(before)) if before[i] != after[i]]
    assert changed == sorted(f["position"] for f in out["flips"]) and len(changed) == 3
    hit = set()
    for f in out["flips"]:
        p = f["position"]
        assert bin(before[p] ^ after[p]).count("1") == 1 and 1 << f["bit"] == before[p] ^ after[p]
        assert (f["was"], f["now"]) == (before[p], after[p])
        assert not any(a <= p < b for a, b in w.controls)
        base, last, start, end = next(x for x in w.batches if x[2] <= p < x[3])
        assert (f["batch_base_offset"], f["batch_last_offset"], f["batch_position"]) == (base, last, start)
        assert p >= start + HEADER  # in the records, never the batch header
        if (start, end) in w.compressed:
            assert f["in"] == "records" and f["offset"] is None
        else:
            assert f["in"] == "value" and any(a <= p < b and o == f["offset"] for a, b, o in w.values)
        hit.add(base)
    assert len(hit) == 3  # each flip in its own batch
    # Kept beside the node's other run files, so the heal finds them.
    assert len((tmp_path / "run" / "kchaos-corrupt").read_text().splitlines()) == 3


def test_the_seed_decides_the_flips(tmp_path, part):
    d, _ = part
    pristine = (d / "00000000000000000000.log").read_bytes()
    seen = {}
    for seed in ("7", "7", "8", "123456789"):
        (d / "00000000000000000000.log").write_bytes(pristine)
        shutil.rmtree(tmp_path / "run", ignore_errors=True)
        flips = ctl(tmp_path, "corrupt", str(d), seed, "2")["flips"]
        seen.setdefault(seed, []).append([(f["position"], f["bit"]) for f in flips])
    assert seen["7"][0] == seen["7"][1]
    assert len({tuple(v[0]) for v in seen.values()}) == 3


def test_uncorrupt_puts_back_every_byte_and_is_idempotent(tmp_path, part):
    d, _ = part
    seg = d / "00000000000000000000.log"
    before = seg.read_bytes()
    ctl(tmp_path, "corrupt", str(d), "11", "3")
    ctl(tmp_path, "corrupt", str(d), "12", "2")  # a second fault stacks; the heal undoes both, newest first
    assert seg.read_bytes() != before
    out = ctl(tmp_path, "uncorrupt")
    assert [r["result"] for r in out["restored"]] == ["restored"] * 5 or "unchanged" in {
        r["result"] for r in out["restored"]}  # two draws may hit the same byte: the older one then finds it back
    assert seg.read_bytes() == before
    assert ctl(tmp_path, "uncorrupt") == {"restored": []}
    assert not (tmp_path / "run" / "kchaos-corrupt").exists()


def test_uncorrupt_leaves_alone_a_byte_kafka_rewrote_and_a_file_it_deleted(tmp_path, part):
    d, _ = part
    seg = d / "00000000000000000000.log"
    flips = ctl(tmp_path, "corrupt", str(d), "5", "2")["flips"]
    data = bytearray(seg.read_bytes())
    p0 = flips[0]["position"]
    data[p0] = (flips[0]["now"] + 3) % 256  # neither the flipped byte nor the original: someone else's
    seg.write_bytes(bytes(data))
    res = {r["position"]: r["result"] for r in ctl(tmp_path, "uncorrupt")["restored"]}
    assert res[p0] == "changed" and res[flips[1]["position"]] == "restored"
    assert seg.read_bytes()[p0] == (flips[0]["now"] + 3) % 256
    ctl(tmp_path, "corrupt", str(d), "5", "1")
    seg.unlink()
    assert [r["result"] for r in ctl(tmp_path, "uncorrupt")["restored"]] == ["gone"]


def test_a_partition_with_only_its_active_segment_is_skipped(tmp_path, part):
    d, _ = part
    (d / "00000000000000000000.log").unlink()
    assert "no closed segment" in ctl(tmp_path, "corrupt", str(d), "1", "3")["skipped"]
    assert not (tmp_path / "run" / "kchaos-corrupt").exists()


def test_kafka_finds_the_flipped_batches_invalid_and_the_healed_file_valid(tmp_path, part):
    """DumpLogSegments (Kafka 3.7.2's, from the jar cache) checks every batch's CRC: the written segment is valid
    Kafka data, the flipped batches and only they fail the check, and the healed file passes again. Batch headers
    only: with --print-data-log the tool dies on a flipped gzip batch (ZipException), it does not report it."""
    libs = cache_dir() / "kafka-3.7.2" / "libs"
    if not any(libs.glob("kafka_2.13-*.jar")) or shutil.which("java") is None:
        pytest.skip("no Kafka 3.7.2 jars or java (make setup)")
    d, w = part
    name = "kchaos-0/00000000000000000000.log"
    shutil.copytree(d, tmp_path / "clean")
    out = ctl(tmp_path, "corrupt", str(d), "3", "3")
    shutil.copytree(d, tmp_path / "bad")
    ctl(tmp_path, "uncorrupt")
    files = [f"clean/{Path(name).name}", f"bad/{Path(name).name}", name]
    p = subprocess.run(["java", "-Xmx256m", "-cp", f"{libs}/*", dump_class_of(libs), "--files", ",".join(files)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = p.stdout.splitlines()
    valid: dict[str, list[tuple[int, str]]] = {}
    file = ""
    for line in lines:
        if line.startswith("Dumping "):
            file = line.split()[1]
            valid[file] = []
        elif line.startswith("baseOffset:"):
            base = int(line.split()[1])
            valid[file].append((base, line.split("isvalid: ")[1].split()[0]))
    assert len(valid) == 3, lines[:5]
    clean, bad, healed = (valid[k] for k in valid)
    assert len(clean) == len(w.batches) + len(w.controls) and all(v == "true" for _, v in clean)
    hit = {f["batch_base_offset"] for f in out["flips"]}
    assert {b for b, v in bad if v == "false"} == hit
    assert healed == clean


def test_the_corrupt_nemesis_is_registered_with_its_targets_and_schedule():
    pkg = nemesis.PACKAGES["corrupt"]
    assert pkg.targets[0] == "leader" and {"follower", "one"} <= set(pkg.targets)
    assert pkg.fs == ("corrupt", "restore") and not pkg.needs_lazyfs
    cfg = TestConfig(time_limit=120, topic=TopicConfig(segment_ms=5000),
                     nemesis=NemesisConfig(names=("corrupt:follower:1",), interval=20, restart_delay=5))
    import random
    ops = pkg.schedule(random.Random(1), cfg, "corrupt:follower:1", "follower:1")
    assert [o.op["f"] for o in ops[:2]] == ["corrupt", "restore"]
    assert ops[0].op["partition"] == 1 and isinstance(ops[0].op["pick"], int)


def _flipped_run(tmp_path: Path, read_at_1: int) -> Path:
    """Three acknowledged sends at offsets 0..2; a corrupt op flips offset 1's value; a poll during the fault
    reads `read_at_1` there; after the restore the final read gets every value right."""
    from histories import HistoryBuilder

    h = HistoryBuilder()
    for i, v in enumerate((500000, 500001, 500002)):
        h.send(i, v, offset=i)
    h.op("nemesis", "invoke", "corrupt", nemesis="corrupt", target="leader", partition=0, pick=1)
    h.op("nemesis", "ok", "corrupt", nemesis="corrupt", nodes=["n1"], partition=0, corrupted={"n1": {
        "partition": 0, "segment": "00000000000000000000.log", "flips": [
            {"position": 145, "bit": 0, "was": 49, "now": 48, "in": "value", "offset": 1, "batch_position": 74,
             "batch_base_offset": 1, "batch_last_offset": 1}]}})
    h.poll(9, [(0, 0, 500000), (0, 1, read_at_1), (0, 2, 500002)])
    h.op("nemesis", "invoke", "restore", nemesis="corrupt")
    h.op("nemesis", "ok", "restore", nemesis="corrupt", nodes=["n1"])
    h.drain(10, 0, [(0, 0, 500000), (0, 1, 500001), (0, 2, 500002)])
    return h.write(tmp_path / "run")


def test_a_flipped_value_that_another_send_wrote_would_pass_under_acks_1_unless_labelled(tmp_path):
    """The checker on a flipped digit that reads as another producer's number (500001 -> 500000): the queue
    kinds it shows as are all allowed under acks=1, so only `corrupt_read` keeps the run from passing."""
    from histories import model

    from kchaos.checkers.corrupt_reads import corrupt_reads
    from kchaos.checkers.verdict.judge import judge

    run = _flipped_run(tmp_path, 500000)
    ops = [json.loads(x) for x in (run / "history.jsonl").read_text().splitlines()]
    _, counts = model([o for o in ops if o["process"] != "nemesis"], idempotent=False)
    assert counts["unexpected"] == 0 and counts["duplicate"] == 1 and counts["inconsistent_offset"] == 1
    test = {"producer": {"acks": "1", "idempotence": False}, "topic": {"min_insync": 1}}
    assert judge({"counts": counts}, test).verdict == "pass"  # a flipped read passing as a rewritten log
    found = corrupt_reads(run / "history.jsonl")
    assert found == {"count": 1, "examples": [{"partition": 0, "offset": 1, "acked": 500001, "read": 500000,
                                                "process": 9, "f": "poll"}]}
    j = judge({"counts": {**counts, "corrupt_read": found["count"]}}, test)
    assert j.verdict == "fail" and j.failed["corrupt_read"] == 1


def test_an_undecodable_flipped_value_is_unexpected_and_a_right_read_is_no_corrupt_read(tmp_path):
    from histories import model

    from kchaos.checkers.corrupt_reads import corrupt_reads
    from kchaos.workloads.clients import UNDECODABLE, decode_value

    assert decode_value(b"5000 0") == UNDECODABLE  # what librdkafka served in the real run (docs/nemeses.md)
    run = _flipped_run(tmp_path, UNDECODABLE)
    ops = [json.loads(x) for x in (run / "history.jsonl").read_text().splitlines()]
    assert model([o for o in ops if o["process"] != "nemesis"], idempotent=False)[1]["unexpected"] == 1
    assert corrupt_reads(run / "history.jsonl")["count"] == 1
    assert corrupt_reads(_flipped_run(tmp_path / "ok", 500001) / "history.jsonl")["count"] == 0
