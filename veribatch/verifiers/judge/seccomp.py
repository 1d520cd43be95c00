"""Seccomp filters for the judge's box, assembled here in classic BPF (no libseccomp).

bubblewrap loads a compiled filter from a file descriptor (``bwrap --seccomp FD``).  A
judged program (a stdin -> stdout solution, validator or generator) gets an *allow-list*
for its language (`ALLOWED`, `filter_program(profile="cpp" | "python")`): the system calls
the shipped REFUTE programs made under ``strace -f`` (the box's own start-up chain of
``prlimit`` and ``sh`` included), plus the few a contest program may need besides (threads,
clocks, sleeping, signals to itself, ``abort``); everything else is EPERM.  That closes whole
classes at once: new processes (``fork``/``vfork``/``clone`` without CLONE_THREAD), pipes
and ``vmsplice``/``splice``/``tee`` (huge pages pinned in pipe slots no limit counts), epoll
(per-uid watches), eventfd, POSIX/SysV IPC, sockets, file creation beyond ``openat``
(mkdir, unlink, rename, fallocate, ftruncate, links), mounts, namespaces, ptrace.  A few
allowed calls are checked by argument: ``open``/``openat`` only to read (no O_WRONLY,
O_RDWR, O_CREAT, O_TRUNC, O_TMPFILE: no file is made or written); ``clone`` only for a
thread (CLONE_THREAD, never CLONE_NEWUSER); ``fcntl`` never to lock, resize a pipe (F_SETPIPE_SZ: the stdout pipe's
pages are the judge uid's pipe quota) or watch a directory (F_NOTIFY); ``kill``,
``tkill``, ``tgkill`` never with a real-time signal (they queue, against the uid's
RLIMIT_SIGPENDING); ``rt_sigaction`` never changes SIGCHLD (below).

One process, then, holds all of a judged program's memory, which RLIMIT_AS bounds, and it
can add no file to the box's tmpfs: the bound the polled limit leans on where no memory
cgroup counts (`sandbox.memory_bound_mb`, `sandbox.memory_mechanism`).

The compiler (`profile=None`, it forks cc1plus, as, ld) gets the older *deny-list* filter,
which refuses, with EPERM, the system calls that reach outside the box's namespaces or
around its memory accounting:

- ``keyctl``, ``add_key``, ``request_key``: the kernel keyring is not namespaced.  A box
  started from an ssh login (pam_keyinit), ``keyctl new_session`` or a Kerberos/AFS setup
  would otherwise search, read and change the host's session keys;
- ``memfd_create``, ``memfd_secret``: their pages count in no resident-set size and are
  capped by no file system, so a program could hold memory the limit never sees;
- ``clone``/``unshare`` with CLONE_NEWUSER: a nested user namespace could mount a tmpfs
  of any size (also refused by bwrap >= 0.8's ``--disable-userns``; not by older ones);
- ``socket``, ``socketpair`` (every address family) and ``io_uring_setup`` (whose
  IORING_OP_SOCKET would make a socket without the ``socket`` call): the box has no use
  for sockets, and their buffers are kernel memory charged to the host's ``tcp_mem`` or to
  nothing a poll sees; AF_VSOCK would bind the machine-wide vsock port space;
- ``shmget``, ``msgget``, ``semget``: SysV IPC objects outlive their processes as kernel
  memory (the box's IPC namespace even lets it raise its own ``kernel/msgmnb``);
- ``setxattr``, ``lsetxattr``, ``fsetxattr``, ``setxattrat``: tmpfs keeps ``user.*``
  extended attributes in kernel memory outside the file system's size cap;
- ``inotify_init``, ``inotify_init1``: instances are a per-uid quota
  (``fs.inotify.max_user_instances``) shared with the judge's other processes;
- ``rt_sigaction`` that sets SIGCHLD's action (a query, with no new action, passes):
  children of a parent that ignores SIGCHLD (or sets SA_NOCLDWAIT) are reaped by the
  kernel and their CPU time reaches no one's rusage, so a stream of children shorter than
  a poll would run uncounted where no cgroup counts CPU (a normal user on cgroup v1); with
  it refused every child is waited for, by its parent or by the box's init, and its time
  reaches the rusage the judge compares with the limit;
- ``flock`` and ``fcntl`` with F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW, F_SETLEASE:
  locks on the host's files bound read-only into the box would block the host's users.

The allow-lists refuse all of those too (none is in them).  System calls of a foreign ABI (i386 ``int 0x80`` and x32 on x86_64) are refused outright
(ENOSYS), so a 32-bit build of the same call cannot slip past the numbers.

Architectures without a table here (`supported` is False) get no filter; the sandbox then
says so in its notes, and the keyring stays reachable there.
"""

from __future__ import annotations

import errno
import os
import struct

# struct sock_filter {u16 code; u8 jt; u8 jf; u32 k}
_LD_W_ABS = 0x20   # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15      # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35      # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45     # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06      # BPF_RET | BPF_K
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_X32_BIT = 0x40000000
_ARG1_LOW = 24     # offsetof(struct seccomp_data, args[1]), low 32 bits
_ARG1_HIGH = 28
_SIGCHLD = 17
_CLONE_NEWUSER = 0x10000000
_ARG0_LOW = 16     # offsetof(struct seccomp_data, args[0]), low 32 bits (little-endian)

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# system call numbers per architecture (asm/unistd_64.h; asm-generic for aarch64)
_NUMBERS: dict[str, dict[str, int]] = {
    "x86_64": {"add_key": 248, "request_key": 249, "keyctl": 250, "memfd_create": 319,
               "memfd_secret": 447, "clone": 56, "unshare": 272, "clone3": 435,
               "socket": 41, "socketpair": 53, "io_uring_setup": 425, "io_uring_enter": 426,
               "io_uring_register": 427, "shmget": 29, "msgget": 68, "semget": 64,
               "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "setxattrat": 463,
               "inotify_init": 253, "inotify_init1": 294, "flock": 73, "fcntl": 72,
               "rt_sigaction": 13,
               "access": 21, "arch_prctl": 158, "brk": 12, "clock_getres": 229,
               "clock_gettime": 228, "clock_nanosleep": 230, "close": 3, "dup": 32, "dup2": 33,
               "dup3": 292, "execve": 59, "exit": 60, "exit_group": 231, "faccessat": 269,
               "faccessat2": 439, "fstat": 5, "futex": 202, "getcpu": 309, "getcwd": 79,
               "getdents64": 217, "getegid": 108, "geteuid": 107, "getgid": 104,
               "getgroups": 115, "getpgid": 121, "getpgrp": 111, "getpid": 39, "getppid": 110,
               "getrandom": 318, "getresgid": 120, "getresuid": 118, "getrlimit": 97,
               "getrusage": 98, "getsid": 124, "gettid": 186, "gettimeofday": 96,
               "getuid": 102, "ioctl": 16, "kill": 62, "lseek": 8, "lstat": 6, "madvise": 28,
               "mmap": 9, "mprotect": 10, "mremap": 25, "munmap": 11, "nanosleep": 35,
               "newfstatat": 262, "open": 2, "openat": 257, "pread64": 17, "prlimit64": 302,
               "pwrite64": 18, "read": 0, "readlink": 89, "readlinkat": 267, "readv": 19,
               "restart_syscall": 219, "rseq": 334, "rt_sigprocmask": 14, "rt_sigreturn": 15,
               "sched_getaffinity": 204, "sched_yield": 24, "set_robust_list": 273,
               "set_tid_address": 218, "sigaltstack": 131, "stat": 4, "statx": 332,
               "sysinfo": 99, "tgkill": 234, "time": 201, "times": 100, "tkill": 200,
               "uname": 63, "wait4": 61, "write": 1, "writev": 20},
    "aarch64": {"add_key": 217, "request_key": 218, "keyctl": 219, "memfd_create": 279,
                "memfd_secret": 447, "clone": 220, "unshare": 97, "clone3": 435,
                "socket": 198, "socketpair": 199, "io_uring_setup": 425, "io_uring_enter": 426,
                "io_uring_register": 427, "shmget": 194, "msgget": 186, "semget": 190,
                "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "setxattrat": 463,
                "inotify_init1": 26, "flock": 32, "fcntl": 25, "rt_sigaction": 134,
                "brk": 214, "clock_getres": 114, "clock_gettime": 113, "clock_nanosleep": 115,
                "close": 57, "dup": 23, "dup3": 24, "execve": 221, "exit": 93,
                "exit_group": 94, "faccessat": 48, "faccessat2": 439, "fstat": 80, "futex": 98,
                "getcpu": 168, "getcwd": 17, "getdents64": 61, "getegid": 177, "geteuid": 175,
                "getgid": 176, "getgroups": 158, "getpgid": 155, "getpid": 172, "getppid": 173,
                "getrandom": 278, "getresgid": 150, "getresuid": 148, "getrlimit": 163,
                "getrusage": 165, "getsid": 156, "gettid": 178, "gettimeofday": 169,
                "getuid": 174, "ioctl": 29, "kill": 129, "lseek": 62, "madvise": 233,
                "mmap": 222, "mprotect": 226, "mremap": 216, "munmap": 215, "nanosleep": 101,
                "newfstatat": 79, "openat": 56, "pread64": 67, "prlimit64": 261,
                "pwrite64": 68, "read": 63, "readlinkat": 78, "readv": 65,
                "restart_syscall": 128, "rseq": 293, "rt_sigprocmask": 135,
                "rt_sigreturn": 139, "sched_getaffinity": 123, "sched_yield": 124,
                "set_robust_list": 99, "set_tid_address": 96, "sigaltstack": 132, "statx": 291,
                "sysinfo": 179, "tgkill": 131, "times": 153, "tkill": 130, "uname": 160,
                "wait4": 260, "write": 64, "writev": 66},
}
DENIED = ("add_key", "request_key", "keyctl", "memfd_create", "memfd_secret",
          "socket", "socketpair", "shmget", "msgget", "semget",
          "setxattr", "lsetxattr", "fsetxattr", "setxattrat",
          "inotify_init", "inotify_init1", "flock")
"""Refused with EPERM (names missing from an architecture's table do not exist there)."""
NOT_IMPLEMENTED = ("io_uring_setup", "io_uring_enter", "io_uring_register")
"""Refused with ENOSYS, as on a kernel built without io_uring: runtimes fall back."""
FCNTL_LOCKS = (6, 7, 37, 38, 1024)
"""fcntl commands refused: F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW, F_SETLEASE."""
_SIGRTMIN = 32
_CLONE_THREAD = 0x00010000
_F_NOTIFY, _F_SETPIPE_SZ = 1026, 1031

_TRACED = ("access", "arch_prctl", "brk", "close", "dup2", "execve", "exit_group", "fcntl",
           "futex", "getegid", "geteuid", "getgid", "getpid", "getppid", "getrandom", "getuid",
           "lseek", "mmap", "mprotect", "munmap", "newfstatat", "openat", "pread64",
           "prlimit64", "read", "readlink", "rseq", "rt_sigaction", "set_robust_list",
           "set_tid_address", "write", "wait4")
"""What every traced program called: the static C++ solutions and, before them, the box's
start-up chain (``prlimit``, ``sh``) that ends in ``execve`` of the program; and what
bwrap's init (the box's pid 1, under the same filter) calls after loading it: ``wait4``
to reap, ``write`` of the exit status to its event descriptor."""
_CONTEST = ("exit", "restart_syscall", "rt_sigreturn", "rt_sigprocmask", "sigaltstack",
            "clock_gettime", "clock_getres", "gettimeofday", "time", "nanosleep",
            "clock_nanosleep", "sched_yield", "sched_getaffinity", "getcpu", "getrusage",
            "times", "uname", "getrlimit", "madvise", "mremap", "fstat", "stat", "lstat",
            "statx", "open", "readv", "writev", "pwrite64", "dup", "dup3", "getcwd",
            "faccessat", "faccessat2", "readlinkat", "tgkill", "tkill", "kill", "clone",
            "gettid", "getpgrp", "getpgid", "getsid", "getresuid", "getresgid", "getgroups")
"""Not seen in the traces but part of an ordinary program's life: threads (``clone``
with CLONE_THREAD, futexes), clocks and sleeps, signal handling and ``abort`` (a signal to
itself), the ``*at``/``stat`` variants other libc builds use, vectored I/O, identity
queries.  None creates a process, a descriptor of a new kind, or kernel memory outside
the process."""
_PYTHON = ("getdents64", "gettid", "ioctl")
"""What the Python programs (``python3 -I -S``: validators, generators, Python solutions)
called besides: directory listings (``sys.path`` scans), ``ioctl`` (``isatty`` on the
standard streams), ``gettid``.  They called ``sysinfo`` too, which is left out: it reports
the node's load and free memory, and every shipped program runs without it."""
ALLOWED: dict[str, tuple[str, ...]] = {
    "cpp": tuple(dict.fromkeys(_TRACED + _CONTEST)),
    "python": tuple(dict.fromkeys(_TRACED + _CONTEST + _PYTHON)),
}
"""The allow-list of each language (names missing from an architecture's table do not
exist there, e.g. ``open`` and ``stat`` on aarch64)."""
ALLOW_FCNTL_REFUSED = (*range(6, 8), 37, 38, 1024, _F_NOTIFY, _F_SETPIPE_SZ)
"""fcntl commands the allow-list refuses: the locks and lease of `FCNTL_LOCKS`, F_NOTIFY,
F_SETPIPE_SZ."""
_SIGNAL_ARG = {"kill": _ARG1_LOW, "tkill": _ARG1_LOW, "tgkill": 32}  # args[2] low: 16 + 2*8
_OPEN_FLAGS_ARG = {"openat": 32, "open": _ARG1_LOW}
OPEN_REFUSED = 0x1 | 0x2 | 0x40 | 0x200 | 0x400000
"""open/openat flags the allow-list refuses: O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, __O_TMPFILE
(the same bits on x86_64 and aarch64).  No traced program opened a file to write (its
output is stdout), and without new files the box's tmpfs mounts stay as bwrap made them:
the program's memory is its address space, nothing beside it."""
FLAG_CHECKED = ("clone", "unshare")
"""Refused only with CLONE_NEWUSER in their flags (a nested user namespace: its own tmpfs
of any size).  bwrap >= 0.8 refuses those too (--disable-userns); older ones (RHEL 8/9
ship 0.4) do not, so the filter does it on every version.  ``clone3`` passes its flags in
memory a filter cannot read: it gets ENOSYS, and glibc falls back to ``clone``."""


def supported(machine: str | None = None) -> bool:
    return (machine or os.uname().machine) in _AUDIT_ARCH


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


def filter_program(machine: str | None = None, profile: str | None = None) -> bytes:
    """The compiled filter (an array of sock_filter) for this machine's architecture: the
    allow-list of language `profile` ("cpp", "python"), or the deny-list when None."""
    machine = machine or os.uname().machine
    if machine not in _AUDIT_ARCH:
        raise ValueError(f"no seccomp table for {machine}")
    if profile is not None:
        return _allow_list(machine, profile)
    nr = _NUMBERS[machine]
    deny = _RET_ERRNO | errno.EPERM
    nosys = _RET_ERRNO | errno.ENOSYS
    # (code, true-target, false-target, k): targets are labels or None (= next instruction)
    prog: list[tuple[int, str | None, str | None, int]] = [
        (_LD_W_ABS, None, None, 4),                          # A = seccomp_data.arch
        (_JEQ_K, "native", "nosys", _AUDIT_ARCH[machine]),   # a foreign ABI: ENOSYS
        ("native", 0, 0, 0),  # type: ignore[list-item]
        (_LD_W_ABS, None, None, 0),                          # A = seccomp_data.nr
    ]
    if machine == "x86_64":
        prog.append((_JGE_K, "nosys", None, _X32_BIT))       # the x32 ABI: ENOSYS
    prog.append((_JEQ_K, "nosys", None, nr["clone3"]))
    for name in NOT_IMPLEMENTED:
        prog.append((_JEQ_K, "nosys", None, nr[name]))
    for name in FLAG_CHECKED:
        prog.append((_JEQ_K, "flags", None, nr[name]))
    prog.append((_JEQ_K, "fcntl", None, nr["fcntl"]))
    prog.append((_JEQ_K, "sigaction", None, nr["rt_sigaction"]))
    for name in DENIED:
        if name in nr:
            prog.append((_JEQ_K, "deny", None, nr[name]))
    prog += [
        (_RET_K, None, None, _RET_ALLOW),
        ("fcntl", 0, 0, 0),  # type: ignore[list-item]
        (_LD_W_ABS, None, None, _ARG1_LOW),
    ]
    for cmd in FCNTL_LOCKS:
        prog.append((_JEQ_K, "deny", None, cmd))
    prog += [
        (_RET_K, None, None, _RET_ALLOW),
        ("sigaction", 0, 0, 0),  # type: ignore[list-item]
        (_LD_W_ABS, None, None, _ARG0_LOW),                 # the signal
        (_JEQ_K, None, "allow", _SIGCHLD),
        (_LD_W_ABS, None, None, _ARG1_LOW),                 # a new action, not a query
        (_JEQ_K, None, "deny", 0),
        (_LD_W_ABS, None, None, _ARG1_HIGH),
        (_JEQ_K, None, "deny", 0),
        ("allow", 0, 0, 0),  # type: ignore[list-item]
        (_RET_K, None, None, _RET_ALLOW),
        ("flags", 0, 0, 0),  # type: ignore[list-item]
        (_LD_W_ABS, None, None, _ARG0_LOW),
        (_JSET_K, "deny", None, _CLONE_NEWUSER),
        (_RET_K, None, None, _RET_ALLOW),
        ("deny", 0, 0, 0),  # type: ignore[list-item]
        (_RET_K, None, None, deny),
        ("nosys", 0, 0, 0),  # type: ignore[list-item]
        (_RET_K, None, None, nosys),
    ]
    return _assemble(prog)


def _allow_list(machine: str, profile: str) -> bytes:
    if profile not in ALLOWED:
        raise ValueError(f"no system-call allow-list for {profile!r} (have: {', '.join(ALLOWED)})")
    nr = _NUMBERS[machine]
    deny = _RET_ERRNO | errno.EPERM
    nosys = _RET_ERRNO | errno.ENOSYS
    special = {"clone", "fcntl", "rt_sigaction", *_SIGNAL_ARG, *_OPEN_FLAGS_ARG}
    prog: list[tuple] = [
        (_LD_W_ABS, None, None, 4),
        (_JEQ_K, "native", "nosys", _AUDIT_ARCH[machine]),
        ("native", 0, 0, 0),
        (_LD_W_ABS, None, None, 0),
    ]
    if machine == "x86_64":
        prog.append((_JGE_K, "nosys", None, _X32_BIT))
    # ENOSYS, not EPERM, where a runtime falls back: glibc's threads to clone, io_uring users
    for name in ("clone3", *NOT_IMPLEMENTED):
        prog.append((_JEQ_K, "nosys", None, nr[name]))
    prog += [(_JEQ_K, "clone", None, nr["clone"]), (_JEQ_K, "fcntl", None, nr["fcntl"]),
             (_JEQ_K, "sigaction", None, nr["rt_sigaction"])]
    for name in _SIGNAL_ARG:
        prog.append((_JEQ_K, f"signal-{name}", None, nr[name]))
    for name in _OPEN_FLAGS_ARG:
        if name in nr:
            prog.append((_JEQ_K, f"open-{name}", None, nr[name]))
    for name in ALLOWED[profile]:
        if name in nr and name not in special:
            prog.append((_JEQ_K, "allow", None, nr[name]))
    prog += [(_RET_K, None, None, deny),
             ("clone", 0, 0, 0),
             (_LD_W_ABS, None, None, _ARG0_LOW),
             (_JSET_K, "deny", None, _CLONE_NEWUSER),
             (_JSET_K, "allow", "deny", _CLONE_THREAD),
             ("fcntl", 0, 0, 0),
             (_LD_W_ABS, None, None, _ARG1_HIGH),
             (_JEQ_K, None, "deny", 0)]
    prog.append((_LD_W_ABS, None, None, _ARG1_LOW))
    for cmd in ALLOW_FCNTL_REFUSED:
        prog.append((_JEQ_K, "deny", None, cmd))
    prog.append((_RET_K, None, None, _RET_ALLOW))
    for name, arg in _SIGNAL_ARG.items():
        prog += [(f"signal-{name}", 0, 0, 0),
                 (_LD_W_ABS, None, None, arg),
                 (_JGE_K, "deny", "allow", _SIGRTMIN)]
    for name, arg in _OPEN_FLAGS_ARG.items():
        prog += [(f"open-{name}", 0, 0, 0),
                 (_LD_W_ABS, None, None, arg),
                 (_JSET_K, "deny", "allow", OPEN_REFUSED)]
    prog += [
        ("sigaction", 0, 0, 0),
        (_LD_W_ABS, None, None, _ARG0_LOW),
        (_JEQ_K, None, "allow", _SIGCHLD),
        (_LD_W_ABS, None, None, _ARG1_LOW),
        (_JEQ_K, None, "deny", 0),
        (_LD_W_ABS, None, None, _ARG1_HIGH),
        (_JEQ_K, None, "deny", 0),
        ("allow", 0, 0, 0),
        (_RET_K, None, None, _RET_ALLOW),
        ("deny", 0, 0, 0),
        (_RET_K, None, None, deny),
        ("nosys", 0, 0, 0),
        (_RET_K, None, None, nosys),
    ]
    return _assemble(prog)


def _assemble(prog: list[tuple]) -> bytes:
    """Resolve labels (a string in the code slot marks one) into relative jump offsets."""
    labels: dict[str, int] = {}
    body: list[tuple] = []
    for item in prog:
        if isinstance(item[0], str):
            labels[item[0]] = len(body)
        else:
            body.append(item)
    out: list[bytes] = []
    for i, (code, jt, jf, k) in enumerate(body):
        def rel(target: str | None, i: int = i) -> int:
            if target is None:
                return 0
            off = labels[target] - i - 1
            if not 0 <= off <= 255:
                raise ValueError(f"seccomp jump to {target} out of range ({off})")
            return off
        out.append(_insn(code, rel(jt), rel(jf), k))
    return b"".join(out)
