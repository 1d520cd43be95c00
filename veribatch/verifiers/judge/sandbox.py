"""The sandbox for untrusted (LLM-written) code: no network, a private temp dir, limits, no root.

Everything a model wrote — input generators, brute forces, agent experiments — and every
compilation of such code runs here.  The sandbox must hold for a normal, non-root cluster
user, so it is built from *rootless* isolation, chosen once per process (`detect_sandbox`):

``bwrap`` (bubblewrap, the default)
    unprivileged user namespaces: new user, pid, net, ipc, uts and cgroup namespaces
    (``--unshare-all``), and no further user namespace inside (``--disable-userns``,
    bwrap >= 0.8: a nested one could mount a tmpfs of any size); the file system is an
    allow-list — ``/usr`` (and the ``/bin``, ``/lib*`` links into it) read-only, a fresh
    ``/proc``, a ``/dev`` and a root that are read-only, and three size-capped tmpfs —
    ``/tmp``, ``/dev/shm`` and the working dir ``/box`` that holds read-only copies of
    the program's files — whose caps together are the run's memory limit (at most
    `BOX_SIZE_MB`).  A seccomp filter (`verifiers.judge.seccomp`) admits a judged program's
    system calls from its language's allow-list (one process, no file created or written,
    no pipes, epoll, IPC, sockets...; ``run_sandboxed(syscalls=...)``) and refuses the
    compiler the calls that reach outside the box (the keyring, memfd, sockets...).  $HOME, /etc (but for the dynamic loader's cache), /root, /work,
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
kills the whole tree at the end; RLIMIT_FSIZE caps each file written, RLIMIT_NOFILE the
open files.  Where this process may create a cgroup in a v1 memory hierarchy (root on a
cgroups-v1 node) each run also gets its own ``memory.limit_in_bytes``, which counts page
cache, tmpfs/shm files and memfd pages too; elsewhere memory is the polled resident set
plus the files in the box's tmpfs (read through ``/proc/PID/root`` of a box process), and
every `ProgramRun` says which (`memory_limit_by`).  The program's
stdin is a sealed memfd copy of its input, never the caller's file (a program can reopen
``/proc/self/fd/0`` for writing), and names no host path.  Temporary folders live below a per-process parent that
is removed even when the judge is SIGKILLed (`verifiers.judge.scratch`).  Inside bwrap a
``prlimit --nproc`` caps the processes of the box itself: on kernels >= 5.14 that count
is per user namespace, so a fork bomb hits it long before the cluster user's own limit.
When started as root (CI containers, SLURM with SlurmUser=root) the sandbox first drops
with ``setpriv`` to a uid of its own per run (`UID_POOL`; 65534, nobody, when the pool is
exhausted): root's processes are exempt from RLIMIT_NPROC and may read anything, so root
never runs model code, and no two boxes share a uid's kernel quotas.
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import os
import platform
import resource
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from veribatch.verifiers import cgroup
from veribatch.verifiers.judge import scratch, seccomp
from veribatch.verifiers.judge.toolchain import compiler_path, judge_python
from veribatch.verifiers.result import Limits
from veribatch.verifiers.runner import Execution, LimitedProcess

NOBODY = 65534
UID_POOL = (1_900_000, 256)
"""(first uid, count): as root each run gets a uid of its own from this pool of otherwise
unused ids (above the 65,536 of a default /etc/subuid range, below the 2**31 of the user
namespaces' overflow), so the kernel's per-uid counts (pipe pages, epoll watches, pending
signals, inotify instances, processes) of one box are never another's; nobody (65534)
when every id of the pool is busy.  ``$VERIBATCH_JUDGE_UIDS=FIRST:COUNT`` moves it."""
UID_POOL_ENV = "VERIBATCH_JUDGE_UIDS"
UID_LOCKS = Path("/run/veribatch-judge-uids")
"""Root-only folder of one lock file per pool uid: a uid is leased while its file is
flock'ed (by any judge process on the node), and free again when the lock holder ends."""
SIGNALS_PENDING = 64
"""RLIMIT_SIGPENDING of a box: on kernels >= 5.14 the count is per user namespace, so a box
queues at most this many and cannot use up the judge uid's whole quota (real-time signals
to itself are refused by the allow-list besides)."""
MAX_PROCESSES = 64
"""Live processes one sandboxed run may have (polled from outside; prlimit inside bwrap)."""
FILE_SIZE_MB = 64
"""RLIMIT_FSIZE: the largest file a sandboxed program may write."""
BOX_SIZE_MB = 256
"""The most the box's tmpfs mounts (/tmp, /box, /dev/shm) may hold together, and never more
than the run's memory limit: tmpfs pages are not resident memory of the program, so without
a cap writing files would be a way around the memory limit."""
OPEN_FILES = 256
"""RLIMIT_NOFILE inside the box (was the node's default, 20,000 and more)."""
SECCOMP_FD = 9
"""The descriptor bwrap reads the seccomp filter from (``bwrap --seccomp 9``)."""
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


_HIDDEN = ("/proc/keys", "/proc/key-users", "/proc/cmdline", "/proc/sys/kernel/random/boot_id",
           "/proc/loadavg", "/proc/meminfo", "/proc/stat", "/proc/vmstat", "/proc/zoneinfo",
           "/proc/buddyinfo", "/proc/slabinfo", "/proc/diskstats", "/proc/swaps",
           "/proc/pressure/cpu", "/proc/pressure/io", "/proc/pressure/memory",
           "/proc/pressure/irq")
"""Host facts the box's /proc would show, read as empty instead: the key descriptions of
the judge's uid (``/proc/keys`` lists every key its user may view, not only the box's),
the kernel command line, the boot id, and the node's load, memory, pressure and disk
figures (what other jobs on the node are doing).  Those this kernel lacks are skipped."""
DATA_FDS = (6, 5, 4)
"""Descriptors of the first files of a box (``bwrap --ro-bind-data``): copied into the box
from the descriptor, so the box's mountinfo names no host path (a bind would)."""
ARGS_FD = 7
"""The descriptor bwrap reads its options from (``bwrap --args 7``): on its command line
they would show the judge's scratch paths to the box as ``/proc/1/cmdline``."""


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
    seccomp: bool = False          # bwrap: load `verifiers.judge.seccomp` from SECCOMP_FD
    uid_pool: tuple[int, int] | None = None  # root: (first, count) of the per-run uids
    userns_disabled: bool = False  # bwrap: --disable-userns (no nested user namespaces)

    @property
    def label(self) -> str:
        return self.kind + (" (UNSAFE: not isolated)" if self.unsafe else "")

    def command(
        self, argv: Sequence[str], stage: Path, files: Sequence[str],
        writable: Mapping[str, Path], box_mb: int = BOX_SIZE_MB,
    ) -> tuple[list[str], Path]:
        """The full argv for running `argv` in a box holding `files` (copied to `stage`),
        with `writable` host dirs mounted at ``/box/<name>``, and the cwd to start it in."""
        # innermost: say "started" on STATUS_FD (a file outside the box), close it, then
        # become the program — which therefore never holds that descriptor
        inner = ["/bin/sh", "-c", _START, "veribatch-start", *argv]
        if self.prlimit:
            inner = [self.prlimit, f"--nproc={MAX_PROCESSES}:{MAX_PROCESSES}", "--", *inner]
        if self.kind == "bwrap":
            assert self.executable
            cmd = [*self.drop, self.executable,
                   *_bwrap_args(self.ro_binds, box_mb, userns=self.userns_disabled)]
            for i, name in enumerate(files):
                if i < len(DATA_FDS):  # a copy from a descriptor: no host path in mountinfo
                    cmd += ["--perms", "0555", "--ro-bind-data", str(DATA_FDS[i]),
                            f"{BOX}/{name}"]
                else:
                    cmd += ["--ro-bind", str(stage / name), f"{BOX}/{name}"]
            for name, host in writable.items():
                cmd += ["--bind", str(host), f"{BOX}/{name}"]
            if self.seccomp:
                cmd += ["--seccomp", str(SECCOMP_FD)]
            # last: every mount point exists now, so the root and /dev can become read-only
            cmd += ["--remount-ro", "/dev", "--remount-ro", "/"]
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


def tmpfs_caps(box_mb: int) -> dict[str, int]:
    """Bytes each writable tmpfs of the box may hold; together `box_mb` MB."""
    mb = 2**20
    return {"/tmp": max(mb, box_mb * mb // 2), BOX: max(mb, box_mb * mb // 4),
            "/dev/shm": max(mb, box_mb * mb // 4)}


def _bwrap_args(ro_binds: Sequence[str], box_mb: int, userns: bool = False) -> list[str]:
    args = ["--unshare-all", "--die-with-parent", "--new-session", "--hostname", "judge"]
    if userns:
        args += ["--unshare-user", "--disable-userns"]
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
    args += ["--proc", "/proc", "--dev", "/dev"]
    for fact in _HIDDEN:
        if os.path.exists(fact):
            args += ["--ro-bind", "/dev/null", fact]
    for where, size in tmpfs_caps(box_mb).items():
        args += ["--size", str(size), "--tmpfs", where]
    return args


def _works(argv: Sequence[str], cwd: str | None = None,
           env: Mapping[str, str] | None = None) -> tuple[bool, str]:
    try:
        p = subprocess.run(list(argv), capture_output=True, timeout=20, cwd=cwd,
                           env=dict(env) if env is not None else None)
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


def _probe_bwrap(drop: tuple[str, ...], binds: tuple[str, ...]
                 ) -> tuple[str | None, str, bool]:
    """(bwrap binary or None, why not, whether it refuses nested user namespaces)."""
    explicit = os.environ.get(BWRAP_ENV)
    bwrap = explicit or shutil.which("bwrap", path=os.environ.get("PATH", "") + ":" + SAFE_PATH)
    if not bwrap or not os.access(bwrap, os.X_OK):
        return None, (f"${BWRAP_ENV}={explicit} is not executable" if explicit
                      else "bubblewrap (bwrap) is not installed"), False
    # Only shell built-ins inside, and the sandbox's own PATH: a caller's PATH without
    # /usr/bin must not make a working bwrap look broken ("cat: not found").
    script = "test ! -e /etc/hostname && echo ok > /tmp/x && read v < /tmp/x && echo $v"
    env = {"PATH": SAFE_PATH, "LANG": "C"}
    with tempfile.TemporaryDirectory(prefix="veribatch-probe-") as tmp:
        os.chmod(tmp, 0o755)
        for userns in (True, False):
            ok, err = _works([*drop, bwrap, *_bwrap_args(binds, 1, userns=userns),
                              "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", BOX,
                              "--", "/bin/sh", "-c", script], cwd=tmp, env=env)
            if ok:
                return bwrap, "", userns
            if not ok and "disable-userns" not in err and "unshare-user" not in err:
                break  # not a matter of the nested-namespace option: report this error
    started = err.startswith("bwrap:") or not err
    what = ("bwrap cannot create namespaces here" if started
            else "bwrap started but the probe inside the box failed")
    return None, f"{what} ({err or 'no message'})", False


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
        bwrap, why, userns_disabled = _probe_bwrap(drop, binds)
        if bwrap:
            if not prlimit:
                notes.append("prlimit missing: no in-box process cap (polling only)")
            if not userns_disabled:
                notes.append("bwrap < 0.8 (no --disable-userns): nested user namespaces are "
                             "not refused; a tmpfs mounted in one escapes the memory limit")
            filtered = seccomp.supported()
            if not filtered:
                notes.append(f"no seccomp table for {platform.machine()}: the kernel keyring "
                             "and memfd_create stay reachable from the box")
            return Sandbox("bwrap", True, True, uid, notes=tuple(notes), executable=bwrap,
                           ro_binds=binds, prlimit=prlimit, drop=drop, seccomp=filtered,
                           userns_disabled=userns_disabled,
                           uid_pool=uid_pool() if drop else None)
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


STATUS_FD = 8
"""The descriptor of the run's status file (outside the box) while the box starts up."""
STARTED = "started"
_WRAPPER = (
    'f=$1 c=$2 s=$3 a=$4; shift 4; '
    'if [ "$c" != - ]; then for p in $(printf %s "$c" | tr : " "); do echo $$ > "$p" || { '
    'echo "veribatch-box: cannot enter the cgroup $p" >&2; exit 125; }; done; fi; '
    '[ "$f" = - ] && f=/dev/null; [ "$a" = - ] && a=/dev/null; '
    'd6=$1 d5=$2 d4=$3; shift 3; '
    'exec "$@" 9<"$f" 8>>"$s" 7<"$a" 6<"$d6" 5<"$d5" 4<"$d4"'
)
"""Runs before the sandbox: joins the run's cgroups (``cgroup.procs`` files joined by ``:``;
as the caller, before any privilege drop), opens the seccomp filter on fd 9 for
``bwrap --seccomp 9``, bwrap's options on `ARGS_FD`, the status file on `STATUS_FD` and
the box's first files on `DATA_FDS` (``/dev/null`` where unused)."""
_START = f'printf {STARTED} >&{STATUS_FD} && exec {STATUS_FD}>&- && exec "$@"'
"""The last step inside the box before the program: the status file says `STARTED` only
when every step before it (privilege drop, bwrap's namespaces and mounts, prlimit)
worked, and the program cannot unsay it — it runs after the write, without the
descriptor, and the file is not in the box.  A run that ends without it is the judge's
failure whatever the program's exit code and stderr say, and a run that has it is the
program's, whatever its text claims."""


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
    stdin_data: bytes | None = None,
    stderr_cap: int | None = None,
    syscalls: str | None = None,
) -> Execution:
    """Run `argv` (relative to the box) with `files` (host paths, or contents) in a fresh box.

    `writable` maps names to host directories mounted read-write at ``/box/<name>`` (the
    compiler's output dir); they must be writable by the sandbox's uid.  The program's stdin
    is a private copy of `stdin_path` (or `stdin_data`), so the caller's file cannot be
    written through ``/proc/self/fd/0``.  The box's tmpfs mounts hold at most
    min(`box_mb`, the memory limit) MB together.  `stderr_cap` keeps stderr apart from the
    output cap (None: stderr shares it).  `syscalls` names the system-call allow-list of the
    program's language (`seccomp.ALLOWED`: "cpp", "python"); None gives the compiler's
    deny-list filter.  As root the run gets a uid of its own (`UID_POOL`).
    """
    box = sandbox or detect_sandbox()
    lease = _lease_uid(box)
    if lease is not None:
        box = dataclasses.replace(box, uid=lease[0], drop=_drop_to(box.drop, lease[0]))
    stage = scratch.mkdtemp("veribatch-box-")
    private = scratch.mkdtemp("veribatch-in-")  # stdin copy and filter: never inside the box
    stdin_fd: int | None = None
    cg: Path | None = None
    pids_cg: Path | None = None
    cpu_cg: Path | None = None
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
            if lease is not None:
                for host in (writable or {}).values():
                    os.chown(host, box.uid, box.uid)
        stage.chmod(0o700 if box.uid is not None else 0o755)
        stdin_copy: Path | None = None
        if stdin_data is not None or stdin_path is not None:
            data = stdin_data if stdin_data is not None else Path(stdin_path or "").read_bytes()
            sealed = _sealed_copy(data)
            if sealed is not None:
                stdin_fd, stdin_copy = sealed, Path(f"/proc/self/fd/{sealed}")
            else:
                stdin_copy = private / "stdin"
                stdin_copy.write_bytes(data)
                stdin_copy.chmod(0o400)
        budget = max(1, min(box_mb, limits.memory_mb))
        cmd, cwd = box.command(argv, stage, list(files), dict(writable or {}), budget)
        filt = "-"
        if box.kind == "bwrap" and box.seccomp:
            (private / "seccomp.bpf").write_bytes(seccomp.filter_program(profile=syscalls))
            filt = str(private / "seccomp.bpf")
        base = cgroup.memory_v1_base()
        if base is not None:
            cg = cgroup.memory_v1_query(base, stage.name, limits.memory_mb)
        pids_base = cgroup.pids_v1_base()
        if pids_base is not None:  # the kernel's own count: a fork bomb that runs out of memory first
            pids_cg = cgroup.pids_v1_query(pids_base, stage.name, max_processes + 4)
        cpu_base = cgroup.cpuacct_v1_base()
        if cpu_base is not None:  # CPU of every task that ever ran, however short-lived
            cpu_cg = cgroup.cpuacct_v1_query(cpu_base, stage.name)
        joined = [str(g / "cgroup.procs") for g in (cg, pids_cg, cpu_cg) if g is not None]
        status = private / "status"
        status.touch()
        options = "-"
        if box.kind == "bwrap" and box.executable in cmd and "--" in cmd:
            at, end = cmd.index(box.executable) + 1, cmd.index("--", cmd.index(box.executable))
            (private / "bwrap.args").write_bytes(b"".join(a.encode() + b"\0"
                                                          for a in cmd[at:end]))
            options = str(private / "bwrap.args")
            cmd = [*cmd[:at], "--args", str(ARGS_FD), *cmd[end:]]  # the command: box paths
        data = [str(stage / name) for name in list(files)[:len(DATA_FDS)]]
        data += ["/dev/null"] * (len(DATA_FDS) - len(data))
        cmd = ["/bin/sh", "-c", _WRAPPER, "veribatch-box", filt, ":".join(joined) or "-",
               str(status), options, *data, *cmd]
        home = BOX if box.fs_isolated else str(stage)
        env = {"PATH": SAFE_PATH, "HOME": home, "TMPDIR": "/tmp" if box.fs_isolated else str(stage),
               "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8"}
        fsize = FILE_SIZE_MB * 2**20
        stack = resource.getrlimit(resource.RLIMIT_STACK)[1]
        rlimits = {
            # Deep recursion is normal in contest code: the main stack may grow up to the
            # memory limit (RLIMIT_AS).  Unlimited, not the memory limit itself: glibc sizes
            # every thread's stack by RLIMIT_STACK, so a finite one as large as the address
            # space would leave no room for a second thread.
            resource.RLIMIT_STACK: (stack, stack),
            resource.RLIMIT_FSIZE: (fsize, fsize),
            resource.RLIMIT_NOFILE: (OPEN_FILES, OPEN_FILES),
            # locked memory and POSIX message queues are per-uid quotas shared with the
            # judge's other processes, and kernel memory no poll sees: none in the box
            resource.RLIMIT_MEMLOCK: (0, 0),
            resource.RLIMIT_MSGQUEUE: (0, 0),
            # counted per user namespace (kernel >= 5.14): the box's own share, not the uid's
            resource.RLIMIT_SIGPENDING: (SIGNALS_PENDING, SIGNALS_PENDING),
        }
        if box.kind == "none" and box.uid is not None:
            # no namespace: RLIMIT_NPROC of uid nobody is the only fork-bomb brake besides polling
            rlimits[resource.RLIMIT_NPROC] = (8 * max_processes, 8 * max_processes)
        ex: Execution = LimitedProcess(
            cmd,
            limits,
            stdout_path,
            cwd=cwd,
            env=env,
            stdin_path=stdin_copy,
            stderr_path=stderr_path,
            output_cap=output_cap,
            kill_on_output_cap=True,
            stderr_cap=stderr_cap,
            address_space=True,
            max_processes=max_processes + 4,  # + bwrap's own processes
            rlimits=rlimits,
            extra_memory=_BoxFiles() if box.kind == "bwrap" else None,
        ).start().wait()  # type: ignore[assignment]
        if ex.termination_reason in ("exit", "signal") and not _started(status):
            ex = dataclasses.replace(ex, termination_reason="error", error=(
                "sandbox failed before the program started: "
                + (ex.read_stderr().strip()[:300] or f"exit status {ex.returncode}")))
        if cg is not None:
            ex = _charged(ex, cg, limits.memory_mb)
        if cpu_cg is not None:
            ex = dataclasses.replace(ex, cpu_s=max(ex.cpu_s, cgroup.cpuacct_v1_seconds(cpu_cg)))
        if ex.termination_reason in ("exit", "signal") and ex.cpu_s > limits.cpu_cap:
            # over the limit in processes no poll saw (children shorter than a poll):
            # the reaped ones' rusage and the cgroup count them, so the end is checked too
            ex = dataclasses.replace(ex, termination_reason="cputime")
        if pids_cg is not None:
            peak, refused = cgroup.pids_v1_outcome(pids_cg)
            # forks refused at the cap: the box was full, whichever limit finally stopped it
            ex = dataclasses.replace(ex, peak_processes=max(
                ex.peak_processes, peak, max_processes if refused else 0))
        return ex
    finally:
        if cg is not None:
            cgroup.remove_v1(cg)
        if pids_cg is not None:
            cgroup.remove_v1(pids_cg)
        if cpu_cg is not None:
            cgroup.remove_v1(cpu_cg)
        shutil.rmtree(stage, ignore_errors=True)
        shutil.rmtree(private, ignore_errors=True)
        if stdin_fd is not None:
            os.close(stdin_fd)
        if lease is not None:
            lease[1].close()


def _sealed_copy(data: bytes) -> int | None:
    """A sealed memfd holding `data` (None where memfd or sealing is missing): the box's
    stdin.  Sealed, no one can write it, not even its owner (the box's uid when the judge is
    a normal user) reopening ``/proc/self/fd/0``; and that link reads
    ``/memfd:veribatch-stdin (deleted)``, no host path, no judge pid."""
    try:
        fd = os.memfd_create("veribatch-stdin", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    except (OSError, AttributeError):
        return None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK
                    | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
    except OSError:
        os.close(fd)
        return None
    return fd


def uid_pool() -> tuple[int, int]:
    """The per-run uid pool: `UID_POOL`, or ``$VERIBATCH_JUDGE_UIDS`` (FIRST:COUNT)."""
    raw = os.environ.get(UID_POOL_ENV)
    if not raw:
        return UID_POOL
    try:
        first, count = (int(x) for x in raw.split(":"))
    except ValueError:
        raise ValueError(f"${UID_POOL_ENV}={raw!r}: expected FIRST:COUNT") from None
    if first < 1000 or count < 1 or first + count >= 2**31 - 1:
        raise ValueError(f"${UID_POOL_ENV}={raw!r}: uids must lie in [1000, 2**31-1)")
    return first, count


def _lease_uid(box: Sandbox) -> tuple[int, IO[bytes]] | None:
    """A free uid of the pool and its held lock file, when the box drops from root; None
    (the run keeps `box.uid`) otherwise or when every uid of the pool is busy."""
    if box.uid_pool is None or not box.drop:
        return None
    first, count = box.uid_pool
    UID_LOCKS.mkdir(mode=0o700, exist_ok=True)
    start = secrets.randbelow(count)
    for i in range(count):
        uid = first + (start + i) % count
        fd = os.open(UID_LOCKS / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        f = os.fdopen(fd, "rb")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            continue
        return uid, f
    return None


def _drop_to(drop: tuple[str, ...], uid: int) -> tuple[str, ...]:
    """`drop` (the setpriv prefix) switching to `uid` instead."""
    return tuple(f"--reuid={uid}" if a.startswith("--reuid=") else
                 f"--regid={uid}" if a.startswith("--regid=") else a for a in drop)


def _started(status: Path) -> bool:
    try:
        return status.read_text().startswith(STARTED)
    except OSError:
        return False


INODE_BYTES = 1024
"""Kernel memory one tmpfs file or directory holds whatever its size (its inode and dentry,
about 1 KiB): the polled limit charges this per inode, so 600k empty files are not free."""


class _BoxFiles:
    """Bytes in the box's tmpfs mounts, read from outside through ``/proc/PID/root`` of a
    process inside the box (allowed for the box's own user and for root): files are
    memory the resident sets do not show, so the polled limit counts them too — their
    blocks and `INODE_BYTES` per inode."""

    _MOUNTS = ("tmp", BOX.lstrip("/"), "dev/shm")

    def __init__(self) -> None:
        self.pid: int | None = None
        try:
            self.own_ns = os.readlink("/proc/self/ns/mnt")
        except OSError:
            self.own_ns = ""

    def __call__(self, pids: Sequence[int]) -> int:
        for pid in ([self.pid] if self.pid is not None else []) + list(reversed(pids)):
            try:
                if os.readlink(f"/proc/{pid}/ns/mnt") == self.own_ns:
                    continue
                total = 0
                for m in self._MOUNTS:
                    st = os.statvfs(f"/proc/{pid}/root/{m}")
                    total += (st.f_blocks - st.f_bfree) * st.f_frsize
                    total += max(0, st.f_files - st.f_ffree) * INODE_BYTES
            except OSError:
                if pid == self.pid:
                    self.pid = None
                continue
            self.pid = pid
            return total
        return 0


def _charged(ex: Execution, cg: Path, memory_mb: int) -> Execution:
    """The run as its memory cgroup saw it: peak of everything charged, OOM kill = memory."""
    peak, oom = cgroup.memory_v1_outcome(cg)
    reason = ex.termination_reason
    if oom and reason in ("exit", "signal", "cputime"):
        reason = "memory"
    return dataclasses.replace(ex, termination_reason=reason,
                               peak_mem_mb=max(ex.peak_mem_mb, peak), memory_limit_by="cgroup-v1")


def memory_bound_mb(memory_mb: int) -> int:
    """The most a judged program can hold where no memory cgroup counts, in MB, beside the
    files it was given: its allow-list leaves it one process (threads share its address
    space, which RLIMIT_AS caps at `memory_mb`) that can create no file in the box's tmpfs,
    no pipe, memfd, socket, IPC object, epoll or eventfd."""
    return memory_mb


def memory_mechanism(ex: Execution, box: Sandbox, memory_mb: int, box_mb: int = BOX_SIZE_MB,
                     syscalls: str | None = None) -> str:
    """How the memory limit was enforced for `ex`, and what it counted, in words, for records.
    `syscalls`: the allow-list the run had (None: the compiler's deny-list)."""
    refused = ("; refused in the box: memfd, sockets, SysV IPC, xattrs, io_uring, inotify "
               "(seccomp), locked memory and POSIX queues (rlimit 0)") if box.seccomp else ""
    if box.seccomp and syscalls:
        refused += (f"; {syscalls} allow-list: one process (no fork), no file created or "
                    "written, no pipes, vmsplice, epoll, eventfd")
    if ex.memory_limit_by == "cgroup-v1":
        return ("cgroup v1 memory.limit_in_bytes: resident memory, page cache, tmpfs and shm "
                "files, kernel memory (inodes, dentries)" + refused)
    if ex.memory_limit_by == "cgroup":
        return ("cgroup v2 memory.max: resident memory, page cache, tmpfs and shm files, "
                "kernel memory" + refused)
    what = "polling: resident memory of the box's processes (RLIMIT_AS as backstop)"
    if box.kind == "bwrap":
        cap = max(1, min(box_mb, memory_mb))
        what += (f" plus the files in its tmpfs (/tmp, /box, /dev/shm; at most {cap} MB "
                 f"together; blocks and {INODE_BYTES} bytes per inode); page cache not counted")
        if box.seccomp and syscalls:
            what += (f"; bound {memory_bound_mb(memory_mb)} MB plus the program's own files: one "
                     "process's address space (RLIMIT_AS), no file created")
        else:
            what += "; pipe buffers (the uid's pipe-user-pages-soft) not counted"
        what += refused if box.seccomp else "; memfd NOT limited (no seccomp filter)"
    else:
        what += "; page cache, tmpfs/shm files and memfd pages are NOT limited"
    return what


def sandbox_report(box: Sandbox) -> dict[str, object]:
    """A JSON-able description for records, `--probe` and the docs."""
    return {"sandbox": box.kind, "unsafe": box.unsafe, "network_isolated": box.network_isolated,
            "fs_isolated": box.fs_isolated, "uid": box.uid if box.uid is not None else os.geteuid(),
            "uid_pool": list(box.uid_pool) if box.uid_pool else None,
            "notes": list(box.notes), "ro_binds": list(box.ro_binds),
            **kernel_userns_report()}
