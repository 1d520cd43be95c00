"""A small seccomp filter for the judge's box, assembled here in classic BPF (no libseccomp).

bubblewrap loads a compiled filter from a file descriptor (``bwrap --seccomp FD``).  The
filter refuses, with EPERM, the system calls that reach *outside* the box's namespaces or
around its memory accounting:

- ``keyctl``, ``add_key``, ``request_key``: the kernel keyring is not namespaced.  A box
  started from an ssh login (pam_keyinit), ``keyctl new_session`` or a Kerberos/AFS setup
  would otherwise search, read and change the host's session keys;
- ``memfd_create``, ``memfd_secret``: their pages count in no resident-set size and are
  capped by no file system, so a program could hold memory the limit never sees.

Nested user namespaces (a private tmpfs with no size cap) are refused by bwrap's own
``--disable-userns``.  System calls of a foreign ABI (i386 ``int 0x80`` and x32 on x86_64)
are refused outright, so a 32-bit build of the same call cannot slip past the numbers.

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
_RET_K = 0x06      # BPF_RET | BPF_K
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_X32_BIT = 0x40000000

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# system call numbers per architecture (asm/unistd_64.h; asm-generic for aarch64)
_NUMBERS: dict[str, dict[str, int]] = {
    "x86_64": {"add_key": 248, "request_key": 249, "keyctl": 250, "memfd_create": 319,
               "memfd_secret": 447},
    "aarch64": {"add_key": 217, "request_key": 218, "keyctl": 219, "memfd_create": 279,
                "memfd_secret": 447},
}
DENIED = ("add_key", "request_key", "keyctl", "memfd_create", "memfd_secret")


def supported(machine: str | None = None) -> bool:
    return (machine or os.uname().machine) in _AUDIT_ARCH


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


def filter_program(machine: str | None = None) -> bytes:
    """The compiled filter (an array of sock_filter) for this machine's architecture."""
    machine = machine or os.uname().machine
    if machine not in _AUDIT_ARCH:
        raise ValueError(f"no seccomp table for {machine}")
    numbers = [_NUMBERS[machine][name] for name in DENIED]
    deny = _RET_ERRNO | errno.EPERM
    foreign = _RET_ERRNO | errno.ENOSYS
    prog: list[bytes] = [
        _insn(_LD_W_ABS, 0, 0, 4),                      # A = seccomp_data.arch
        _insn(_JEQ_K, 1, 0, _AUDIT_ARCH[machine]),      # native ABI: skip the refusal
        _insn(_RET_K, 0, 0, foreign),
        _insn(_LD_W_ABS, 0, 0, 0),                      # A = seccomp_data.nr
    ]
    if machine == "x86_64":
        prog += [_insn(_JGE_K, 0, 1, _X32_BIT), _insn(_RET_K, 0, 0, foreign)]
    for i, nr in enumerate(numbers):
        # on a match jump to the final "deny" (after the remaining compares and the allow)
        prog.append(_insn(_JEQ_K, len(numbers) - i, 0, nr))
    prog += [_insn(_RET_K, 0, 0, _RET_ALLOW), _insn(_RET_K, 0, 0, deny)]
    return b"".join(prog)
