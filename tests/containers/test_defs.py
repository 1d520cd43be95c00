"""The Apptainer definition files: parsed with spython, checked for pins, labels and %test."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from veribatch.containers.definitions import DEFINITIONS_DIR, load_definitions, parse_definition
from veribatch.containers.images import LOCK_NAME, build_argv, check, sha256_file

DEFS = load_definitions()


def test_the_three_verifier_images_exist() -> None:
    assert set(DEFS) == {"uautomizer", "dafny", "judge"}
    assert {d.tool for d in DEFS.values()} == {"uautomizer", "dafny", "judge"}


@pytest.mark.parametrize("name", sorted(DEFS))
def test_definition_is_consistent(name: str) -> None:
    d = DEFS[name]
    assert d.problems() == []
    assert d.base and d.labels["org.veribatch.base"] == d.base
    assert d.test.strip(), "every image must test its tool on a tiny input"


def test_pinned_versions_are_the_benchmarks_ones() -> None:
    # the release line of the UAutomizer the InvBench paper cites (SV-COMP 2024), on Java 11
    assert DEFS["uautomizer"].tool_version == "0.2.4"
    assert "v0.2.4/UltimateAutomizer-linux.zip" in DEFS["uautomizer"].labels["org.veribatch.tool.url"]
    assert "openjdk-11-jre-headless" in " ".join(DEFS["uautomizer"].post)
    assert "command -v z3)\" = /opt/UAutomizer-linux/z3" in DEFS["uautomizer"].test
    assert DEFS["dafny"].tool_version == "4.10.0"
    assert "v4.10.0/dafny-4.10.0-x64" in DEFS["dafny"].labels["org.veribatch.tool.url"]
    assert "dotnet-runtime-8.0" in " ".join(DEFS["dafny"].post)
    judge = " ".join(DEFS["judge"].post)
    assert "g++-12=12.2.0-14+deb12u1" in judge and "python3.11=3.11.2-6+deb12u6" in judge
    assert DEFS["judge"].labels["org.veribatch.cxxflags"] == (
        "-static -DONLINE_JUDGE -O2 -std=c++23 -march=x86-64 -mno-avx2")  # REFUTE's harness


def test_judge_image_flags_match_the_judge_code() -> None:
    from veribatch.verifiers.judge import CPP_FLAGS

    assert DEFS["judge"].labels["org.veribatch.cxxflags"] == " ".join(CPP_FLAGS)


def test_tests_run_the_tool_on_an_input() -> None:
    assert "Ultimate.py --spec" in DEFS["uautomizer"].test and "grep -qx TRUE" in DEFS["uautomizer"].test
    assert "dafny verify" in DEFS["dafny"].test and "0 errors" in DEFS["dafny"].test
    assert "veribatch.verifiers.judge" in DEFS["judge"].test


def test_container_paths_match_the_adapters() -> None:
    from veribatch.verifiers.dafny import DafnyTool
    from veribatch.verifiers.uautomizer import UAutomizerTool

    assert UAutomizerTool.container_executable.startswith("/opt/UAutomizer-linux/")
    assert "unzip -q /tmp/ua.zip -d /opt" in DEFS["uautomizer"].post
    assert DafnyTool.container_executable == "/opt/dafny/dafny"
    assert "/opt/dafny/dafny --version" in DEFS["dafny"].test


def test_checksums_are_real_or_clearly_unpinned() -> None:
    for d in DEFS.values():
        sha = d.labels.get("org.veribatch.tool.sha256")
        if sha is not None:
            assert sha == "UNPINNED" or (len(sha) == 64 and int(sha, 16) >= 0)
            if sha == "UNPINNED":
                assert any("has no sha256" in u for u in d.unpinned())


def test_unpinned_items_are_detected(tmp_path: Path) -> None:
    text = (DEFINITIONS_DIR / "dafny.def").read_text()
    digest = "a" * 64
    pinned = (text.replace("From: ubuntu:24.04", f"From: ubuntu:24.04@sha256:{digest}")
              .replace("TOOL_SHA256=UNPINNED", f"TOOL_SHA256={digest}")
              .replace("org.veribatch.tool.sha256 UNPINNED", f"org.veribatch.tool.sha256 {digest}"))
    p = tmp_path / "dafny.def"
    p.write_text(pinned)
    d = parse_definition(p)
    assert not any("sha256" in u for u in d.unpinned())
    assert d.problems() == []
    p.write_text(pinned.replace(f"TOOL_SHA256={digest}", "TOOL_SHA256=" + "b" * 64))
    assert "%post TOOL_SHA256 differs" in " ".join(parse_definition(p).problems())


def test_check_catches_a_swapped_image(tmp_path: Path) -> None:
    defs = tmp_path / "containers"
    shutil.copytree(DEFINITIONS_DIR, defs, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    images = tmp_path / "images"
    images.mkdir()
    sif = images / "judge.sif"
    sif.write_bytes(b"built image")
    lock = {"judge": {"sif": "judge.sif", "sha256": hashlib.sha256(b"built image").hexdigest(),
                      "definition_sha256": sha256_file(defs / "judge.def")}}
    (images / LOCK_NAME).write_text(json.dumps(lock))
    by_name = {c.name: c for c in check(images, run_tests=False, definitions_dir=defs)}
    assert by_name["judge"].ok and by_name["dafny"].ok  # dafny: not built, only notes
    assert "not built" in " ".join(by_name["dafny"].notes)
    assert not check(images, run_tests=False, strict=True, definitions_dir=defs)[0].ok
    sif.write_bytes(b"another image")
    by_name = {c.name: c for c in check(images, run_tests=False, definitions_dir=defs)}
    assert not by_name["judge"].ok and "differs from the lock" in by_name["judge"].problems[0]
    sif.write_bytes(b"built image")
    (defs / "judge.def").write_text((defs / "judge.def").read_text() + "\n# edited\n")
    by_name = {c.name: c for c in check(images, run_tests=False, definitions_dir=defs)}
    assert "changed since" in " ".join(by_name["judge"].problems)


def test_build_argv() -> None:
    assert build_argv("/usr/bin/apptainer", DEFS["judge"], Path("/img/judge.sif")) == [
        "/usr/bin/apptainer", "build", "--force", "/img/judge.sif", str(DEFINITIONS_DIR / "judge.def")]


def _checksum_block(lines: list[str]) -> str:
    """The lines of a %post that verify the downloaded file (from `actual=` to its `fi`)."""
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("actual=$(sha256sum"))
    end = next(i for i in range(start, len(lines)) if lines[i].strip() == "fi")
    return "\n".join(lines[start:end + 1])


@pytest.mark.parametrize("name", ["uautomizer", "dafny"])
def test_post_refuses_unpinned_or_wrong_downloads(name: str, tmp_path: Path) -> None:
    """Run the definition's own checksum lines in bash on a stand-in download."""
    block = _checksum_block(DEFS[name].post)
    download = re.search(r"sha256sum (\S+)", block).group(1)  # e.g. /tmp/ua.zip
    fake = tmp_path / "download.zip"
    fake.write_bytes(b"release archive")
    good = hashlib.sha256(b"release archive").hexdigest()
    script = block.replace(download, str(fake))

    def run(pin: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", f"TOOL_URL=u\nTOOL_SHA256={pin}\n{script}\necho BUILT"],
                              capture_output=True, text=True)

    assert "BUILT" in run(good).stdout
    unpinned = run("UNPINNED")
    assert unpinned.returncode != 0 and "BUILT" not in unpinned.stdout and good in unpinned.stderr
    wrong = run("0" * 64)
    assert wrong.returncode != 0 and "checksum mismatch" in wrong.stderr


def test_building_an_unknown_image_names_the_known_ones(tmp_path: Path) -> None:
    """Refused before apptainer is looked for (exit 2, no traceback), on any machine."""
    import sys

    proc = subprocess.run([sys.executable, "-m", "veribatch", "images", "build", "nosuch",
                           "--dir", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "unknown image 'nosuch'" in proc.stderr
    assert all(name in proc.stderr for name in DEFS)
    assert "Traceback" not in proc.stderr
