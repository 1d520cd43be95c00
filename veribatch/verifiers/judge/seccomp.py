"""A small seccomp filter for the judge's box, assembled here in classic BPF (no libseccomp).

bubblewrap loads a compiled filter from a file descriptor (``bwrap --seccomp FD``).  The
filter refuses, with EPERM, the system calls that reach *outside* the box's namespaces or
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

System calls of a foreign ABI (i386 ``int 0x80`` and x32 on x86_64) are refused outright
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
               "rt_sigaction": 13},
    "aarch64": {"add_key": 217, "request_key": 218, "keyctl": 219, "memfd_create": 279,
                "memfd_secret": 447, "clone": 220, "unshare": 97, "clone3": 435,
                "socket": 198, "socketpair": 199, "io_uring_setup": 425, "io_uring_enter": 426,
                "io_uring_register": 427, "shmget": 194, "msgget": 186, "semget": 190,
                "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "setxattrat": 463,
                "inotify_init1": 26, "flock": 32, "fcntl": 25, "rt_sigaction": 134},
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
FLAG_CHECKED = ("clone", "unshare")
"""Refused only with CLONE_NEWUSER in their flags (a nested user namespace: its own tmpfs
of any size).  bwrap >= 0.8 refuses those too (--disable-userns); older ones (RHEL 8/9
ship 0.4) do not, so the filter does it on every version.  ``clone3`` passes its flags in
memory a filter cannot read: it gets ENOSYS, and glibc falls back to ``clone``."""


def supported(machine: str | None = None) -> bool:
    return (machine or os.uname().machine) in _AUDIT_ARCH


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


def filter_program(machine: str | None = None) -> bytes:
    """The compiled filter (an array of sock_filter) for this machine's architecture."""
    machine = machine or os.uname().machine
    if machine not in _AUDIT_ARCH:
        raise ValueError(f"no seccomp table for {machine}")
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
