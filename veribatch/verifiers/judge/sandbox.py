"""The sandbox for untrusted (LLM-written) code: no network, a private temp dir, limits, no root.

Everything a model wrote — input generators, brute forces, agent experiments — and every
compilation of such code runs here.  The sandbox must hold for a normal, non-root cluster
user, so it is built from *rootless* isolation, chosen once per process (`detect_sandbox`):

``bwrap`` (bubblewrap, the default)
    unprivileged user namespaces: new user, pid, net, ipc, uts and cgroup namespaces
    (``--unshare-all``); the file system is an allow-list — ``/usr`` (and the ``/bin``,
    ``/lib*`` links into it) read-only, a fresh ``/proc`` and ``/dev``, a size-capped
    tmpfs for ``/tmp`` and for the working dir ``/box`` that holds read-only copies of
    the program's files.  $HOME, /etc (but for the dynamic loader's cache), /root, /work,
    the cluster's scratch file systems: none of it exists inside.  The only network
    interface is the namespace's own loopback, so nothing outside can be reached.
    ``--die-with-parent`` and the pid namespace make the kernel kill every process of the
    box when its first process dies, so a double-forked ``setsid`` daemon cannot escape.
``apptainer``
    the judge image (`containers/judge.def`) with ``--containall --net --network none``,
    where apptainer exists and an image is configured ($VERIBATCH_JUDGE_IMAGE or the
    task's ``image`` option) but bubblewrap cannot run.
``none`` (only with an explicit ``unsafe`` request)
    what the node offers without namespaces: own temp dir, limits, privilege drop when
    started as root.  Every result records ``sandbox="none"``, ``unsafe=True``.

Where neither isolation works and ``unsafe`` was not asked for, `detect_sandbox` raises
`SandboxUnavailable`, whose message says what was tried and how to fix it.

In every mode `verifiers.runner.LimitedProcess` enforces CPU/wall time, memory (RLIMIT_AS
and resident-memory polling), an output cap and a live-process cap from outside, and
kills the whole tree at the end; RLIMIT_FSIZE caps each file written.  Inside bwrap a
``prlimit --nproc`` caps the processes of the box itself: on kernels >= 5.14 that count
is per user namespace, so a fork bomb hits it long before the cluster user's own limit.
When started as root (CI containers, SLURM with SlurmUser=root) the sandbox first drops
to uid/gid 65534 (nobody) with ``setpriv``: root's processes are exempt from RLIMIT_NPROC
and may read anything, so root never runs model code.
"""

from __future__ import annotations

import functools
import os
import platform
import resource
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from veribatch.verifiers.result import Limits
from veribatch.verifiers.runner import Execution, LimitedProcess

NOBODY = 65534
MAX_PROCESSES = 64
"""Live processes one sandboxed run may have (polled from outside; prlimit inside bwrap)."""
FILE_SIZE_MB = 64
"""RLIMIT_FSIZE: the largest file a sandboxed program may write."""
BOX_SIZE_MB = 256
"""Size cap of each tmpfs (/box and /tmp) inside bwrap: tmpfs pages are not resident memory
of the program, so without a cap writing files would be a way around the memory limit."""
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
BOX = "/box"
MODES = ("auto", "bwrap", "apptainer", "unsafe")
IMAGE_ENV = "VERIBATCH_JUDGE_IMAGE"
IN_IMAGE_ENV = "VERIBATCH_IN_JUDGE_IMAGE"
"""Set by the judge image (containers/judge.def): this process already runs inside it, started
by the apptainer runtime with --containall --network none (verifiers/apptainer.py)."""
BWRAP_ENV = "VERIBATCH_BWRAP"
"""Path of the bubblewrap binary when it is not /usr/bin/bwrap or on PATH."""
BIND_ENV = "VERIBATCH_SANDBOX_BIND"
"""Colon-separated host paths made visible read-only inside bwrap (e.g. a compiler
installed under /opt or /sw by environment modules)."""

# Top-level host paths bwrap shows read-only, when they exist; merged-/usr symlinks
# (/bin -> usr/bin on Debian 12, Fedora...) are recreated as symlinks.
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The few /etc files programs and the dynamic loader need; not /etc/passwd, not /etc/hostname.
_ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives")


class SandboxUnavailable(RuntimeError):
    """No isolation works on this node and running unsandboxed was not explicitly allowed."""


@dataclass(frozen=True)
class Sandbox:
    """How untrusted programs run on this node (see the module docstring for the kinds)."""

    kind: str                      # "bwrap" | "apptainer" | "none"
    network_isolated: bool
    fs_isolated: bool
    uid: int | None                # the uid programs run as, when we switch it (root only)
    unsafe: bool = False           # kind "none": ran without isolation, on explicit request
    notes: tuple[str, ...] = ()
    executable: str | None = None  # bwrap / apptainer binary
    image: str | None = None       # apptainer image
    ro_binds: tuple[str, ...] = ()  # extra host paths visible read-only (bwrap)
    prlimit: str | None = None     # prlimit binary used for the per-box process cap
    drop: tuple[str, ...] = field(default=())  # setpriv prefix (root only)

    @property
    def label(self) -> str:
        return self.kind + (" (UNSAFE: not isolated)" if self.unsafe else "")

    def command(
        self, argv: Sequence[str], stage: Path, files: Sequence[str],
        writable: Mapping[str, Path], box_mb: int = BOX_SIZE_MB,
    ) -> tuple[list[str], Path]:
        """The full argv for running `argv` in a box holding `files` (copied to `stage`),
        with `writable` host dirs mounted at ``/box/<name>``, and the cwd to start it in."""
        inner = list(argv)
        if self.prlimit:
            inner = [self.prlimit, f"--nproc={MAX_PROCESSES}:{MAX_PROCESSES}", "--", *inner]
        if self.kind == "bwrap":
            assert self.executable
            cmd = [*self.drop, self.executable, *_bwrap_args(self.ro_binds, box_mb)]
            for name in files:
                cmd += ["--ro-bind", str(stage / name), f"{BOX}/{name}"]
            for name, host in writable.items():
                cmd += ["--bind", str(host), f"{BOX}/{name}"]
            return [*cmd, "--chdir", BOX, "--", *inner], stage
        if self.kind == "apptainer" and self.executable is None:  # already inside the image
            for name, host in writable.items():
                link = stage / name
                if not link.exists():
                    link.symlink_to(host)
            return [*self.drop, *inner], stage
        if self.kind == "apptainer":
            assert self.executable and self.image
            binds: list[str] = ["--bind", f"{stage}:{BOX}"]
            for name, host in writable.items():
                binds += ["--bind", f"{host}:{BOX}/{name}"]
            cmd = [*self.drop, self.executable, "exec", "--containall", "--cleanenv", "--no-home",
                   "--net", "--network", "none", *binds, "--pwd", BOX, self.image, *inner]
            return cmd, stage
        # none: the staged copy is the working dir; writable dirs appear as symlinks into it
        for name, host in writable.items():
            link = stage / name
            if not link.exists():
                link.symlink_to(host)
        return [*self.drop, *inner], stage


def _bwrap_args(ro_binds: Sequence[str], box_mb: int) -> list[str]:
    args = ["--unshare-all", "--die-with-parent", "--new-session", "--hostname", "judge"]
    for d in _SYSTEM_DIRS:
        p = Path(d)
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), d]
        elif p.is_dir():
            args += ["--ro-bind", d, d]
    for f in _ETC_FILES:
        args += ["--ro-bind-try", f, f]
    for extra in ro_binds:
        args += ["--ro-bind", extra, extra]
    size = str(box_mb * 2**20)
    args += ["--proc", "/proc", "--dev", "/dev",
             "--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", BOX]
    return args


def _works(argv: Sequence[str], cwd: str | None = None) -> tuple[bool, str]:
    try:
        p = subprocess.run(list(argv), capture_output=True, timeout=20, cwd=cwd)
    except (OSError, subprocess.SubprocessError) as e:
        return False, str(e)
    return p.returncode == 0, (p.stderr or p.stdout).decode(errors="replace").strip()[-300:]


def _drop_prefix() -> tuple[tuple[str, ...], int | None, list[str]]:
    """setpriv to nobody when we are root; (prefix, uid, notes)."""
    if os.geteuid() != 0:
        return (), None, []
    setpriv = shutil.which("setpriv", path=SAFE_PATH)
    if not setpriv:
        return (), None, ["running as root and setpriv (util-linux) is missing: cannot drop "
                          "privileges"]
    return (setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
            "--no-new-privs", "--"), NOBODY, []


def extra_binds() -> tuple[str, ...]:
    """Host paths outside /usr that programs need read-only: the compiler's and the
    interpreter's installation prefixes (environment modules put them in /opt, /sw...)
    and whatever $VERIBATCH_SANDBOX_BIND lists."""
    from veribatch.verifiers.judge.compile import compiler_path
    from veribatch.verifiers.judge.run import judge_python

    out: list[str] = []
    for tool in (compiler_path(required=False), judge_python(required=False)):
        if not tool:
            continue
        real = Path(tool).resolve()
        if not any(real.is_relative_to(d) for d in ("/usr", "/bin", "/lib", "/lib64", "/sbin")):
            prefix = real.parent.parent if real.parent.name == "bin" else real.parent
            out.append(str(prefix))
    out += [p for p in os.environ.get(BIND_ENV, "").split(":") if p]
    return tuple(dict.fromkeys(p for p in out if Path(p).exists()))


def kernel_userns_report() -> dict[str, str]:
    """What this kernel says about unprivileged user namespaces (for `--probe` and reports)."""
    report = {"kernel": platform.release()}
    for key, path in (("max_user_namespaces", "/proc/sys/user/max_user_namespaces"),
                      ("unprivileged_userns_clone", "/proc/sys/kernel/unprivileged_userns_clone"),
                      ("apparmor_restrict_unprivileged_userns",
                       "/proc/sys/kernel/apparmor_restrict_unprivileged_userns")):
        try:
            report[key] = Path(path).read_text().strip()
        except OSError:
            report[key] = "absent"
    return report


def _kernel_at_least(major: int, minor: int) -> bool:
    try:
        parts = platform.release().split(".")
        return (int(parts[0]), int(parts[1].split("-")[0])) >= (major, minor)
    except (ValueError, IndexError):
        return False


def _probe_bwrap(drop: tuple[str, ...], binds: tuple[str, ...]) -> tuple[str | None, str]:
    explicit = os.environ.get(BWRAP_ENV)
    bwrap = explicit or shutil.which("bwrap", path=os.environ.get("PATH", "") + ":" + SAFE_PATH)
    if not bwrap or not os.access(bwrap, os.X_OK):
        return None, (f"${BWRAP_ENV}={explicit} is not executable" if explicit
                      else "bubblewrap (bwrap) is not installed")
    with tempfile.TemporaryDirectory(prefix="veribatch-probe-") as tmp:
        os.chmod(tmp, 0o755)
        ok, err = _works([*drop, bwrap, *_bwrap_args(binds, 1), "--chdir", BOX, "--", "/bin/sh",
                          "-c", "test ! -e /etc/hostname && echo ok > /tmp/x && cat /tmp/x"], cwd=tmp)
    if not ok:
        return None, f"bwrap cannot create namespaces here ({err or 'no message'})"
    return bwrap, ""


@functools.cache
def detect_sandbox(mode: str = "auto", image: str | None = None) -> Sandbox:
    """The sandbox for this process (probed once per (mode, image)).

    `mode`: ``auto`` (bwrap, else apptainer with an image, else refuse), ``bwrap``,
    ``apptainer`` (needs `image` or $VERIBATCH_JUDGE_IMAGE), or ``unsafe`` (no isolation,
    allowed explicitly; recorded on every result).
    """
    if mode not in MODES:
        raise ValueError(f"sandbox mode {mode!r}: expected one of {', '.join(MODES)}")
    drop, uid, notes = _drop_prefix()
    if os.geteuid() == 0 and uid is None:
        raise SandboxUnavailable(notes[0])
    prlimit = shutil.which("prlimit", path=SAFE_PATH)
    if prlimit and not _kernel_at_least(5, 14):
        notes.append("kernel < 5.14: RLIMIT_NPROC is per user, not per box; the process "
                     "cap is the runner's polling only")
        prlimit = None
    tried: list[str] = []
    if mode in ("auto", "bwrap"):
        binds = extra_binds()
        bwrap, why = _probe_bwrap(drop, binds)
        if bwrap:
            if not prlimit:
                notes.append("prlimit missing: no in-box process cap (polling only)")
            return Sandbox("bwrap", True, True, uid, notes=tuple(notes), executable=bwrap,
                           ro_binds=binds, prlimit=prlimit, drop=drop)
        tried.append(why)
        if mode == "bwrap":
            raise SandboxUnavailable(_refusal(tried))
    if mode in ("auto", "apptainer") and os.environ.get(IN_IMAGE_ENV):
        # nested namespaces refused inside the image: the image's own isolation is the box
        notes.append("inside the judge image: isolated by apptainer --containall --network none")
        return Sandbox("apptainer", True, True, uid, notes=tuple(notes), prlimit=prlimit, drop=drop)
    if mode in ("auto", "apptainer"):
        img = image or os.environ.get(IMAGE_ENV)
        from veribatch.verifiers.apptainer import apptainer_binary
        from veribatch.verifiers.base import ToolNotFoundError

        try:
            binary: str | None = apptainer_binary()
        except ToolNotFoundError as e:
            binary, why = None, str(e)
        if binary and img and Path(img).is_file():
            return Sandbox("apptainer", True, True, uid, notes=tuple(notes), executable=binary,
                           image=str(Path(img).resolve()), prlimit=None, drop=drop)
        if binary:
            why = (f"apptainer found but no judge image (${IMAGE_ENV} or -o image=...)"
                   if not img else f"judge image {img} does not exist")
        tried.append(why)
        if mode == "apptainer":
            raise SandboxUnavailable(_refusal(tried))
    if mode == "unsafe":
        notes.append("UNSAFE: no namespace isolation (explicitly requested); programs see the "
                     "file system and, unless unshare works, the network")
        unshare = shutil.which("unshare", path=SAFE_PATH)
        net = bool(unshare) and _works([*drop, unshare, "--net", "--map-root-user", "--",
                                        "true"])[0]
        prefix = (*drop, unshare, "--net", "--map-root-user", "--") if net and unshare else drop
        return Sandbox("none", net, False, uid, unsafe=True, notes=tuple(notes),
                       prlimit=None, drop=tuple(prefix))
    raise SandboxUnavailable(_refusal(tried))


def _refusal(tried: list[str]) -> str:
    rep = kernel_userns_report()
    return (
        "no sandbox for untrusted code on this node: " + "; ".join(tried) + ". "
        f"Kernel {rep['kernel']}: user.max_user_namespaces={rep['max_user_namespaces']}, "
        f"kernel.unprivileged_userns_clone={rep['unprivileged_userns_clone']}. Fix: install "
        "bubblewrap (apt-get install bubblewrap / dnf install bubblewrap) on a kernel that "
        "allows unprivileged user namespaces, or use apptainer with the judge image "
        f"(${IMAGE_ENV}=judge.sif); or, knowingly, run without isolation with the option "
        "sandbox=unsafe (recorded on every result)."
    )


def run_sandboxed(
    argv: Sequence[str],
    files: Mapping[str, Path | bytes],
    limits: Limits,
    *,
    stdin_path: Path | None,
    stdout_path: Path,
    stderr_path: Path,
    output_cap: int,
    sandbox: Sandbox | None = None,
    writable: Mapping[str, Path] | None = None,
    max_processes: int = MAX_PROCESSES,
    box_mb: int = BOX_SIZE_MB,
) -> Execution:
    """Run `argv` (relative to the box) with `files` (host paths, or contents) in a fresh box.

    `writable` maps names to host directories mounted read-write at ``/box/<name>`` (the
    compiler's output dir); they must be writable by the sandbox's uid.
    """
    box = sandbox or detect_sandbox()
    stage = Path(tempfile.mkdtemp(prefix="veribatch-box-"))
    try:
        for name, src in files.items():
            dst = stage / name
            if isinstance(src, bytes):
                dst.write_bytes(src)
            else:
                shutil.copyfile(src, dst)
            dst.chmod(0o755)
        if box.uid is not None:
            os.chown(stage, box.uid, box.uid)
            for name in files:
                os.chown(stage / name, box.uid, box.uid)
        stage.chmod(0o700 if box.uid is not None else 0o755)
        cmd, cwd = box.command(argv, stage, list(files), dict(writable or {}), box_mb)
        home = BOX if box.fs_isolated else str(stage)
        env = {"PATH": SAFE_PATH, "HOME": home, "TMPDIR": "/tmp" if box.fs_isolated else str(stage),
               "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8"}
        mem = limits.memory_mb * 2**20
        fsize = FILE_SIZE_MB * 2**20
        rlimits = {
            resource.RLIMIT_STACK: (mem, mem),  # deep recursion is normal in contest code
            resource.RLIMIT_FSIZE: (fsize, fsize),
        }
        if box.kind == "none" and box.uid is not None:
            # no namespace: RLIMIT_NPROC of uid nobody is the only fork-bomb brake besides polling
            rlimits[resource.RLIMIT_NPROC] = (8 * max_processes, 8 * max_processes)
        return LimitedProcess(
            cmd,
            limits,
            stdout_path,
            cwd=cwd,
            env=env,
            stdin_path=stdin_path,
            stderr_path=stderr_path,
            output_cap=output_cap,
            kill_on_output_cap=True,
            address_space=True,
            max_processes=max_processes + 4,  # + bwrap's own processes
            rlimits=rlimits,
        ).start().wait()  # type: ignore[return-value]
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def sandbox_report(box: Sandbox) -> dict[str, object]:
    """A JSON-able description for records, `--probe` and the docs."""
    return {"sandbox": box.kind, "unsafe": box.unsafe, "network_isolated": box.network_isolated,
            "fs_isolated": box.fs_isolated, "uid": box.uid if box.uid is not None else os.geteuid(),
            "notes": list(box.notes), "ro_binds": list(box.ro_binds),
            **kernel_userns_report()}
