"""The apptainer runtime: the argv it builds (pinned) and the image digest in versions and keys.

Apptainer cannot be installed here; a stand-in `apptainer` that records its argv and
runs the tool part of it checks that the Verifier wraps every call (version included).
"""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

import pytest

from veribatch.verifiers import apptainer
from veribatch.verifiers.base import Query, Tool
from veribatch.verifiers.result import Limits, Status
from veribatch.verifiers.verifier import Verifier


def test_exec_argv_is_pinned(tmp_path: Path) -> None:
    img = tmp_path / "uautomizer.sif"
    data, sub, work = tmp_path / "data", tmp_path / "data" / "sub", tmp_path / "work"
    argv = apptainer.exec_argv(img, ["/opt/UAutomizer-linux/Ultimate.py", "--file", "x.c"],
                               read_only=[data, sub, data], writable=[work], pwd=work)
    assert argv == [
        "apptainer", "exec", "--containall", "--cleanenv", "--no-home",
        "--bind", f"{data}:{data}:ro",
        "--bind", f"{work}:{work}",
        "--pwd", str(work),
        str(img),
        "/opt/UAutomizer-linux/Ultimate.py", "--file", "x.c",
    ]


def test_network_off_and_writable_wins_over_read_only(tmp_path: Path) -> None:
    argv = apptainer.exec_argv(tmp_path / "i.sif", ["t"], read_only=[tmp_path / "w" / "in"],
                               writable=[tmp_path / "w"], network=False, binary="/usr/bin/apptainer")
    assert argv[:8] == ["/usr/bin/apptainer", "exec", "--containall", "--cleanenv", "--no-home",
                        "--net", "--network", "none"]
    assert f"{tmp_path / 'w' / 'in'}:{tmp_path / 'w' / 'in'}:ro" not in argv


def test_image_digest_is_the_file_sha256(tmp_path: Path) -> None:
    img = tmp_path / "x.sif"
    img.write_bytes(b"SIF" * 1000)
    assert apptainer.image_digest(img) == hashlib.sha256(b"SIF" * 1000).hexdigest()


def test_missing_apptainer_names_where_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("VERIBATCH_APPTAINER", raising=False)
    with pytest.raises(FileNotFoundError, match="apptainer not found.*singularity"):
        apptainer.apptainer_binary()


STAND_IN = """#!/bin/sh
# Stand-in for apptainer: log argv, then run what follows the image (argv after the .sif).
printf '%s\\n' "$*" >> "{log}"
while [ "$#" -gt 0 ]; do case "$1" in *.sif) shift; break;; esac; shift; done
exec "$@"
"""


def test_verifier_runs_every_call_inside_the_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shell_tool: Tool
) -> None:
    fake = tmp_path / "apptainer"
    fake.write_text(STAND_IN.format(log=tmp_path / "calls.txt"))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("VERIBATCH_APPTAINER", str(fake))
    img = tmp_path / "shell.sif"
    img.write_bytes(b"image-v1")
    shell_tool.version_args = ("-c", "echo sh-in-image-2")
    v = Verifier(shell_tool, runtime="apptainer", image=img, cache_dir=tmp_path / "cache")
    digest = hashlib.sha256(b"image-v1").hexdigest()
    assert v.version == f"sh-in-image-2+sha256:{digest}"
    q = tmp_path / "q" / "t.sh"
    q.parent.mkdir()
    q.write_text("echo VERDICT TRUE")
    r = v.run(Query((q,)), Limits(10), tmp_path / "logs")
    assert r.status is Status.TRUE and r.tool_version.endswith(digest)
    version_call, run_call = (tmp_path / "calls.txt").read_text().splitlines()
    assert version_call.startswith("exec --containall --cleanenv --no-home")
    assert f"--bind {q.parent}:{q.parent}:ro" in run_call
    workdir = Path(r.log_path).parent
    assert f"--bind {workdir}:{workdir} --pwd {workdir} {img} /bin/sh {q}" in run_call


def test_apptainer_runtime_needs_an_image(tmp_path: Path, shell_tool: Tool) -> None:
    with pytest.raises(ValueError, match="needs an image"):
        Verifier(shell_tool, runtime="apptainer")
    with pytest.raises(FileNotFoundError, match="no.sif"):
        Verifier(shell_tool, runtime="apptainer", image=tmp_path / "no.sif")


def test_tools_without_network_run_with_network_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shell_tool: Tool
) -> None:
    from veribatch.verifiers.judge.tool import JudgeTool

    assert JudgeTool.container_network is False  # untrusted programs
    fake = tmp_path / "apptainer"
    fake.write_text(STAND_IN.format(log=tmp_path / "calls.txt"))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("VERIBATCH_APPTAINER", str(fake))
    img = tmp_path / "judge.sif"
    img.write_bytes(b"image")
    shell_tool.version_args = ("-c", "echo v")
    shell_tool.container_network = False
    q = tmp_path / "t.sh"
    q.write_text("echo VERDICT FALSE")
    r = Verifier(shell_tool, runtime="apptainer", image=img).run(Query((q,)), Limits(10), tmp_path)
    assert r.status is Status.FALSE
    run_call = (tmp_path / "calls.txt").read_text().splitlines()[-1]
    assert run_call.startswith("exec --containall --cleanenv --no-home --net --network none ")


# Stand-in for apptainer's environment handling under --cleanenv (apptainer's
# `env.SetContainerEnv` and `runtime_vars.sh`): the image's PATH, then every
# APPTAINERENV_<NAME> of the apptainer process as <NAME>, APPTAINERENV_PREPEND_PATH in front.
CLEANENV_STAND_IN = """#!/bin/sh
printf '%s\\n' "$*" >> "{log}"
while [ "$#" -gt 0 ]; do case "$1" in *.sif) shift; break;; esac; shift; done
exec env -i PATH="${{APPTAINERENV_PREPEND_PATH:+$APPTAINERENV_PREPEND_PATH:}}/image/bin:/usr/bin:/bin" \\
    GREETING="${{APPTAINERENV_GREETING:-unset}}" "$@"
"""


def test_the_tool_environment_reaches_the_process_inside_the_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shell_tool: Tool
) -> None:
    from veribatch.verifiers.base import ToolEnvironment

    assert apptainer.exec_env(ToolEnvironment({"A": "1"}, ("/t", "/u")), {"APPTAINERENV_PREPEND_PATH": "/x"}) == {
        "APPTAINERENV_A": "1", "APPTAINERENV_PREPEND_PATH": "/t:/u:/x"}
    fake = tmp_path / "apptainer"
    fake.write_text(CLEANENV_STAND_IN.format(log=tmp_path / "calls.txt"))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("VERIBATCH_APPTAINER", str(fake))
    img = tmp_path / "shell.sif"
    img.write_bytes(b"image")
    shell_tool.version_args = ("-c", "echo v")
    monkeypatch.setattr(shell_tool, "environment", lambda executable, limits: ToolEnvironment(
        {"GREETING": f"hello {limits.memory_mb}"}, (str(Path(executable).parent) + "/tools",)))
    q = tmp_path / "t.sh"
    q.write_text('echo "PATH=$PATH"; echo "GREETING=$GREETING"; echo VERDICT TRUE')
    r = Verifier(shell_tool, runtime="apptainer", image=img).run(Query((q,)), Limits(10, memory_mb=512),
                                                                 tmp_path / "logs")
    assert r.status is Status.TRUE
    lines = Path(r.log_path).read_text().splitlines()
    assert lines[:2] == ["PATH=/bin/tools:/image/bin:/usr/bin:/bin", "GREETING=hello 512"]
    run_call = (tmp_path / "calls.txt").read_text().splitlines()[-1]
    assert "GREETING" not in run_call and "--env" not in run_call  # the pinned argv is unchanged


# Stand-in for apptainer running the UAutomizer image: log argv; what follows the image runs
# as Ultimate.py would inside it, replaying a recorded real run, only where the bound
# writable folders let it write: the --data folder must be one of them.
UA_STAND_IN = """#!/bin/sh
printf '%s\\n' "$*" >> "{log}"
rw=""; while [ "$#" -gt 0 ]; do
  case "$1" in --bind) case "$2" in *:ro) ;; *) rw="$rw ${{2%%:*}}";; esac; shift;; *.sif) shift; break;; esac
  shift
done
prev=""; data=""; for a in "$@"; do [ "$prev" = "--data" ] && data="$a"; prev="$a"; done
ok=""; for d in $rw; do case "$data" in "$d"/*) ok=1;; esac; done
[ -n "$ok" ] && [ -d "$data" ] || {{ echo "The configuration area at '$data' could not be created."; exit 1; }}
cat "{rec}/true_invariants/stdout.txt"
"""


def test_uautomizer_in_its_image_writes_its_settings_only_into_a_bound_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_data: Path
) -> None:
    """The image is read-only: the version call and every query give Ultimate a --data
    folder inside a folder bound writable (a scratch folder, the query's work directory)."""
    from veribatch.verifiers.uautomizer import UAutomizerTool

    fake = tmp_path / "apptainer"
    fake.write_text(UA_STAND_IN.format(log=tmp_path / "calls.txt", rec=shared_data / "recorded" / "uautomizer"))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("VERIBATCH_APPTAINER", str(fake))
    img = tmp_path / "ua.sif"
    img.write_bytes(b"ua-image")
    v = Verifier(UAutomizerTool(), runtime="apptainer", image=img)
    assert v.version.startswith("0.2.3-release-863304a+sha256:")
    q = tmp_path / "q" / "p.c"
    q.parent.mkdir()
    q.write_text("int main(void) { return 0; }\n")
    r = v.run(Query((q,)), Limits(30), tmp_path / "logs")
    assert r.status is Status.TRUE, Path(r.log_path).read_text()[-300:]
    version_call, run_call = (tmp_path / "calls.txt").read_text().splitlines()
    workdir = Path(r.log_path).parent
    assert f"--bind {workdir}:{workdir} --pwd {workdir}" in run_call
    assert f"--data {workdir}/ultimate-data" in run_call and not (workdir / "ultimate-data").exists()
    scratch = version_call.split("--pwd ")[1].split()[0]
    assert f"--bind {scratch}:{scratch} " in version_call and f"--data {scratch}/ultimate-data" in version_call
    assert not Path(scratch).exists()  # removed after the version was read
