"""Escape attempts against the judge's sandbox, run as an unprivileged user (and as root).

Every attempt must fail: fork bomb, connecting to the host or the internet, writing
outside the box (the user's home, a world-writable dir), reading the user's home or
/etc, sleeping forever, a setsid daemon, flooding stdout, filling the disk, and leaking
files through the compiler's error messages (``#include "/etc/hostname"``).

The unprivileged run uses setpriv to become uid 65534 (nobody), with its own home
holding a secret, exactly what a cluster user's job looks like to the sandbox.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import site
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.support import DIR as SUPPORT
from tests.support import REPO
from tests.verifiers.judge.test_escape_suite import needs_root

DRIVER = SUPPORT / "escape_driver.py"
NOBODY = 65534
pytestmark = pytest.mark.slow  # ~35 s: two users x 13 attacks, fork bombs run to their limit


def _python_for_nobody() -> tuple[str, str]:
    """(interpreter, PYTHONPATH) the unprivileged user can run with our packages."""
    path = os.pathsep.join([str(REPO), *site.getsitepackages()])
    probe = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
             sys.executable, "-c", "import psutil"]
    if subprocess.run(probe, capture_output=True, cwd="/", env={"PYTHONPATH": path}).returncode == 0:
        return sys.executable, path
    # e.g. a pyenv interpreter under /root: use the system one with the venv's site-packages
    return "/usr/bin/python3", path


@pytest.fixture(scope="module")
def escape_results() -> Iterator[dict[str, dict]]:
    needs_root()
    if not Path("/usr/bin/setpriv").exists():
        pytest.fail("setpriv (util-linux) is required")
    marker = f"vbesc{uuid.uuid4().hex[:10]}"
    # not pytest's tmp_path: its parent is private to root, and nobody must reach its home
    base = Path(tempfile.mkdtemp(prefix="veribatch-escape-"))
    base.chmod(0o755)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(0.2)
    results: dict[str, dict] = {}
    python, pypath = _python_for_nobody()
    try:
        for who in ("nobody", "root"):
            home = base / f"home-{who}"
            outside = base / f"outside-{who}"
            work = base / f"work-{who}"
            for d in (home, outside, work, home / ".cache"):
                d.mkdir()
            outside.chmod(0o777)
            secret = home / "secret.txt"
            secret.write_text(f"TOKEN-{marker}\n")
            secret.chmod(0o600)
            home.chmod(0o700)
            spec = base / f"spec-{who}.json"
            spec.write_text(json.dumps({"marker": marker, "port": srv.getsockname()[1],
                                        "home_secret": str(secret), "outside": str(outside),
                                        "work": str(work)}))
            prefix: list[str] = []
            if who == "nobody":
                for p in (home, work, home / ".cache", secret):
                    os.chown(p, NOBODY, NOBODY)
                prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
            env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "PYTHONPATH": pypath,
                   "VERIBATCH_CACHE": str(home / ".cache")}
            t = time.monotonic()
            p = subprocess.run([*prefix, python, str(DRIVER), str(spec)], capture_output=True,
                               text=True, env=env, cwd=str(work), timeout=600)
            assert p.returncode == 0, p.stderr[-3000:]
            res = json.loads(p.stdout.strip().splitlines()[-1])
            res.update(marker=marker, home=str(home), outside=str(outside), secret=str(secret),
                       total_s=time.monotonic() - t)
            try:
                conn, _ = srv.accept()
                res["host_got_connection"] = conn.recv(100).decode(errors="replace")
            except (TimeoutError, OSError):
                res["host_got_connection"] = None
            results[who] = res
        yield results
    finally:
        srv.close()
        shutil.rmtree(base, ignore_errors=True)


def _alive(marker: str) -> list[str]:
    deadline = time.monotonic() + 3
    while True:
        alive = [" ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"])
                 if marker in " ".join(p.info["cmdline"] or [])]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


@pytest.fixture(params=["nobody", "root"])
def res(request: pytest.FixtureRequest, escape_results: dict[str, dict]) -> dict:
    return escape_results[request.param]


def test_the_unprivileged_user_gets_full_isolation(escape_results: dict[str, dict]) -> None:
    r = escape_results["nobody"]
    assert r["euid"] == NOBODY
    box = r["sandbox"]
    assert box["sandbox"] == "bwrap" and not box["unsafe"]
    assert box["network_isolated"] and box["fs_isolated"]
    # root drops to nobody before entering the sandbox
    assert escape_results["root"]["sandbox"]["uid"] == NOBODY


def test_fork_bombs_are_stopped(res: dict) -> None:
    for name in ("fork_bomb_py", "fork_bomb_cpp"):
        a = res["attacks"][name]
        assert a["verdict"] in ("RE", "TLE", "MLE"), a
        assert a["wall_s"] < 20, a
    assert _alive(res["marker"]) == []


def test_no_network_to_the_host_or_the_internet(res: dict) -> None:
    for name in ("connect_host", "connect_internet"):
        a = res["attacks"][name]
        assert a["verdict"] == "RE" and "connected" not in a["output"], a
    assert res["host_got_connection"] is None


def test_nothing_is_written_outside_the_box(res: dict) -> None:
    m = res["marker"]
    for name in ("write_home", "write_outside"):
        a = res["attacks"][name]
        assert a["verdict"] == "RE" and "wrote" not in a["output"], a
    assert not (Path(res["home"]) / f"pwned-{m}").exists()
    assert not (Path(res["outside"]) / f"pwned-{m}").exists()
    # a judged program creates no file, not even in the box's own (private) /tmp
    a = res["attacks"]["write_tmp"]
    assert a["verdict"] == "RE" and "PermissionError" in a["stderr"], a
    assert not Path(f"/tmp/pwned-{m}").exists()


def test_home_and_etc_are_not_readable(res: dict) -> None:
    token = f"TOKEN-{res['marker']}"
    a = res["attacks"]["read_home"]
    assert a["verdict"] == "RE" and token not in a["output"] + a["stderr"]
    etc = res["attacks"]["read_etc"]["output"]
    hostname = Path("/etc/hostname").read_text().strip() if Path("/etc/hostname").exists() else ""
    assert "/etc/hostname blocked" in etc and "/etc/passwd blocked" in etc
    assert not hostname or hostname not in etc.replace("/etc/hostname", "")
    root_listing = set(ast.literal_eval(etc.strip().splitlines()[-1]))
    assert root_listing <= {"bin", "box", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc",
                            "sbin", "tmp", "usr"}, root_listing  # no home, root, work, scratch...


def test_sleep_forever_and_daemons_are_killed(res: dict) -> None:
    a = res["attacks"]["sleep_forever"]
    assert a["verdict"] == "TLE" and a["termination"] == "walltime" and a["wall_s"] < 10
    d = res["attacks"]["daemon"]  # a judged program may not fork (its allow-list)
    assert d["verdict"] == "RE" and "PermissionError" in d["stderr"], d
    d = res["attacks"]["daemon_forks_allowed"]  # the compiler's filter: it may
    assert d["returncode"] == 0 and d["output"] == "parent done\n", d
    assert _alive(res["marker"]) == []  # the setsid'd grandchild died with the pid namespace


def test_floods_are_capped(res: dict) -> None:
    a = res["attacks"]["huge_output"]
    assert a["verdict"] == "OLE" and a["output"] == ""
    f = res["attacks"]["fill_disk"]
    # the box is a size-capped tmpfs: writing stops long before 8 GB
    assert f["verdict"] in ("RE", "OK"), f
    written = int(f["output"].split()[-1]) if f["output"].strip() else 0
    assert written * 8 <= 256


def test_the_compiler_leaks_no_files(res: dict) -> None:
    token = f"TOKEN-{res['marker']}"
    c = res["compile"]
    assert not c["include_hostname"]["compiled"] and not c["include_secret"]["compiled"]
    assert "No such file" in c["include_hostname"]["message"]
    assert token not in c["include_secret"]["message"]
    hostname = Path("/etc/hostname").read_text().strip() if Path("/etc/hostname").exists() else ""
    if hostname:
        msg = c["include_hostname"]["message"].replace("/etc/hostname", "")
        assert hostname not in msg
