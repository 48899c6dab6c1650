"""core.jvm.class_archive on this host's JDK: the first run of a program writes its classes' archive, later runs
start from it, and a run that fails keeps none."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kchaos.core.jvm import SHORT_LIVED, archiving, class_archive

HELLO = "public class Hello { public static void main(String[] a) { System.out.println(\"hello \" + a.length); } }"


@pytest.fixture
def program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "Hello.java"
    src.write_text(HELLO)
    subprocess.run(["javac", "-d", str(tmp_path / "classes"), str(src)], check=True, timeout=120)
    subprocess.run(["jar", "cf", str(tmp_path / "hello.jar"), "-C", str(tmp_path / "classes"), "."], check=True,
                   timeout=120)
    return tmp_path / "hello.jar"  # jars only: the JVM will not archive classes read from a directory


def _run(classes: Path, *identity: str) -> tuple[list[str], str]:
    with class_archive("java", "hello", str(classes), *identity) as opts:
        out = subprocess.run(["java", *SHORT_LIVED, *opts, "-cp", str(classes), "Hello", "x"],
                             capture_output=True, text=True, timeout=120, check=True).stdout
    return opts, out


def test_the_first_run_writes_the_archive_the_next_runs_read(program: Path, tmp_path: Path) -> None:
    first, out = _run(program)
    assert out == "hello 1\n"
    assert archiving(first)
    archives = list((tmp_path / "cache" / "cds").glob("hello-*.jsa"))
    assert len(archives) == 1 and archives[0].stat().st_size > 0
    assert not list((tmp_path / "cache" / "cds").glob(".*.tmp"))
    second, out = _run(program)
    assert out == "hello 1\n"
    assert f"-XX:SharedArchiveFile={archives[0]}" in second
    other, _ = _run(program, "--another-mode")  # another identity: an archive of its own
    assert archiving(other)
    assert len(list((tmp_path / "cache" / "cds").glob("hello-*.jsa"))) == 2


def test_a_jvm_that_cannot_write_the_archive_marks_it_and_runs_without_one_after(tmp_path: Path, program: Path
                                                                              ) -> None:
    classes = tmp_path / "classes"  # a directory on the classpath: the JVM refuses to archive it
    with class_archive("java", "dir", str(classes)) as opts:
        r = subprocess.run(["java", *opts, "-cp", str(classes), "Hello"], capture_output=True, timeout=120)
    assert r.returncode != 0 and archiving(opts)
    with class_archive("java", "dir", str(classes)) as opts:
        assert opts == []
    assert not list((tmp_path / "cache" / "cds").glob("dir-*.jsa"))


def test_a_run_that_raises_keeps_no_archive(program: Path, tmp_path: Path) -> None:
    with pytest.raises(subprocess.CalledProcessError):
        with class_archive("java", "hello", str(program)) as opts:
            subprocess.run(["java", *opts, "-cp", str(program), "NoSuchClass"], capture_output=True, check=True,
                           timeout=120)
    assert not list((tmp_path / "cache" / "cds").glob("*hello*"))
