"""Attack programs of the escape suite's second round (issue 28), run inside the judge's box.

Each program prints what it managed; `escape_suite.drive` judges held or escaped from that
and from the verdict the judge gave.  Programs that hold memory print ``held N`` (MB held
when they ended) and ``done`` as their last line, so "nothing printed" (the program never
ran) is told apart from "refused" (it ran and held nothing).
"""

from __future__ import annotations

HOLD_MB = 600

# -- memory the kernel keeps: none of it is a resident page of a box process -------------

_HOLD_TAIL = """
print("held", held >> 20)
print("done")
"""

SYSV_SHM = f"""import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
held = 0
size = 32 << 20
try:
    while held < ({HOLD_MB} << 20):
        sid = libc.shmget(0, ctypes.c_size_t(size), 0o1600)   # IPC_PRIVATE | IPC_CREAT
        if sid < 0:
            print("shmget refused", ctypes.get_errno()); break
        addr = libc.shmat(sid, None, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            print("shmat refused", ctypes.get_errno()); break
        ctypes.memset(addr, 1, size)
        libc.shmdt(ctypes.c_void_p(addr))                      # the segment stays, unmapped
        held += size
except OSError as e:
    print("stopped", e)
""" + _HOLD_TAIL

SYSV_MSG = f"""import ctypes
libc = ctypes.CDLL(None, use_errno=True)
held = 0
# the box may raise its own IPC namespace's per-queue limit
try:
    open("/proc/sys/kernel/msgmnb", "w").write(str(64 << 20))
    print("raised msgmnb")
except OSError as e:
    print("msgmnb", e.errno)
class Msg(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 8000)]
m = Msg(1, b"x" * 8000)
queues = 0
while held < ({HOLD_MB} << 20) and queues < 30000:
    q = libc.msgget(0, 0o1600)
    if q < 0:
        print("msgget refused", ctypes.get_errno()); break
    queues += 1
    while held < ({HOLD_MB} << 20):
        if libc.msgsnd(q, ctypes.byref(m), 8000, 0o4000) != 0:  # IPC_NOWAIT: queue full
            break
        held += 8000
""" + _HOLD_TAIL

UNIX_BUFFERS = f"""import socket, errno
held = 0
keep = []
chunk = b"x" * 65536
try:
    while held < ({HOLD_MB} << 20) and len(keep) < 110:
        a, b = socket.socketpair()
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
        b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        a.setblocking(False)
        try:
            while True:
                held += a.send(chunk)
        except BlockingIOError:
            pass
        keep.append((a, b))
except OSError as e:
    print("refused", e.errno)
""" + _HOLD_TAIL

TCP_BUFFERS = f"""import socket
held = 0
keep = []
chunk = b"x" * 65536
try:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0)); srv.listen(200)
    while held < ({HOLD_MB} << 20) and len(keep) < 100:
        c = socket.socket()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
        c.connect(srv.getsockname())
        s, _ = srv.accept()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        c.setblocking(False)
        try:
            while True:
                held += c.send(chunk)
        except BlockingIOError:
            pass
        keep.append((c, s))
except OSError as e:
    print("refused", e.errno)
""" + _HOLD_TAIL

XATTRS = f"""import os
held = 0
val = b"x" * 65000
try:
    for i in range(100000):
        p = "/tmp/x%d" % i
        open(p, "w").close()
        for k in range(8):
            os.setxattr(p, "user.k%d" % k, val)
            held += len(val)
        if held >= ({HOLD_MB} << 20):
            break
except OSError as e:
    print("refused", e.errno)
""" + _HOLD_TAIL

EMPTY_FILES = """import os
n = 0
try:
    for d in range(400):
        os.mkdir("/tmp/d%d" % d)
        for i in range(1000):
            os.close(os.open("/tmp/d%d/%d" % (d, i), os.O_CREAT | os.O_WRONLY, 0o600))
            n += 1
except OSError as e:
    print("stopped", e.errno)
held = n * 1024   # an empty tmpfs file: an inode and a dentry, about 1 KiB of kernel memory
""" + _HOLD_TAIL

KERNEL_MEMORY = {
    "SysV shared memory": SYSV_SHM,
    "SysV message queues (msgmnb raised)": SYSV_MSG,
    "unix socketpair buffers": UNIX_BUFFERS,
    "loopback TCP buffers": TCP_BUFFERS,
    "tmpfs xattrs": XATTRS,
    "400k empty files": EMPTY_FILES,
}

# -- CPU in short-lived children ---------------------------------------------------------

_BURN = """import os, time
def burn(s):
    t = time.process_time()
    while time.process_time() - t < s:
        pass
"""

CPU_WAITED = _BURN + """
for i in range(500):           # 500 x 5 ms = 2.5 s of CPU, each child shorter than a poll
    pid = os.fork()
    if pid == 0:
        burn(0.005)
        os._exit(0)
    os.waitpid(pid, 0)
print("done")
"""

CPU_ORPHANS = _BURN + """
import signal
try:                           # never waited for: the kernel reaps them
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
except OSError as e:
    print("refused", e.errno)
for i in range(500):
    if os.fork() == 0:
        burn(0.005)
        os._exit(0)
    time.sleep(0.006)
print("done")
"""

CPU_DOUBLE_FORK = _BURN + """
for i in range(500):           # re-parented to the box's init, reaped there
    pid = os.fork()
    if pid == 0:
        if os.fork() == 0:
            burn(0.005)
            os._exit(0)
        os._exit(0)
    os.waitpid(pid, 0)
    time.sleep(0.006)
print("done")
"""

CPU = {"children waited for": CPU_WAITED, "children reaped by the kernel (SIGCHLD ignored)": CPU_ORPHANS,
       "double-forked children": CPU_DOUBLE_FORK}

# -- output just over the cap, then a quick exit -----------------------------------------


def over_cap(cap: int, stream: str = "stdout") -> str:
    return f"""import sys
sys.{stream}.buffer.write(b"7" * ({cap} + 4096))
sys.{stream}.flush()
"""


# -- text that looks like the judge's own failures ---------------------------------------

SPOOFS = {
    "bwrap: namespace failed, exit 1": ("bwrap: Creating new namespace failed: x", 1),
    "setpriv: exit 1": ("setpriv: setresuid failed: Operation not permitted", 1),
    "veribatch-box: exit 125": ("veribatch-box: cannot enter the cgroup /x", 125),
    "FATAL: exit 1": ("FATAL:   container creation failed", 1),
}


def spoof(text: str, code: int) -> str:
    return f"import sys\nsys.stderr.write({text!r} + '\\n')\nsys.exit({code})\n"


# -- an input the validator and the solutions read differently ---------------------------

VALIDATOR = """import sys
a, b = map(int, sys.stdin.buffer.read().decode().split())
assert b != 0 and abs(a) <= 100 and abs(b) <= 100
"""
CORRECT = """#include <iostream>
int main(){ long a = 0, b = 0; std::cin >> a >> b; std::cout << (b ? a / b : 0) << "\\n"; }
"""
WRONG = """#include <iostream>
int main(){ volatile long a = 0, b = 0; long x, y; std::cin >> x >> y; a = x; b = y;
  std::cout << a / b << "\\n"; }
"""
"""The wrong solution divides by the second number: zero only if it reads something else
than the validator did (C++ extraction leaves 0 where it fails)."""

TWO_READINGS = {
    "underscore (0_5)": b"-3 0_5\n",
    "fullwidth digit": "-3 \uff15\n".encode(),
    "arabic-indic digit": "-3 \u0665\n".encode(),
    "\\x1c separator": b"-3\x1c5\n",
    "no-break space": "-3\u00a05\n".encode(),
}

# -- address families the box has no use for -------------------------------------------

VSOCK = """import socket
try:
    s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    s.bind((socket.VMADDR_CID_ANY, 40123))
    print("bound")
except OSError as e:
    print("refused", e.errno)
"""

IO_URING_SOCKET = r"""import ctypes, mmap, socket, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L = ctypes.c_long
params = ctypes.create_string_buffer(120)
fd = libc.syscall(L(425), L(4), params)            # io_uring_setup
if fd < 0:
    print("io_uring refused", ctypes.get_errno())
    raise SystemExit(0)
sq_entries, cq_entries = struct.unpack_from("II", params, 0)
sq = struct.unpack_from("IIIIIIIIQ", params, 40)    # head tail mask entries flags dropped array
cq = struct.unpack_from("IIIIIIIIQ", params, 80)    # head tail mask entries overflow cqes flags
sq_len = sq[6] + sq_entries * 4
cq_len = cq[5] + cq_entries * 16
sqr = mmap.mmap(fd, sq_len, offset=0)
cqr = mmap.mmap(fd, cq_len, offset=0x8000000)
sqes = mmap.mmap(fd, sq_entries * 64, offset=0x10000000)
sqe = bytearray(64)
struct.pack_into("BBHiQQIIQ", sqe, 0, 45, 0, 0, 40, 1, 0, 0, 0, 7)  # IORING_OP_SOCKET, AF_VSOCK
sqes[0:64] = bytes(sqe)
tail = struct.unpack_from("I", sqr, sq[1])[0]
struct.pack_into("I", sqr, sq[6] + (tail & sq[2]) * 4, 0)
struct.pack_into("I", sqr, sq[1], tail + 1)
r = libc.syscall(L(426), L(fd), L(1), L(1), L(1), None, L(0))   # io_uring_enter, GETEVENTS
head = struct.unpack_from("I", cqr, cq[0])[0]
_, res, _ = struct.unpack_from("QiI", cqr, cq[5] + (head & cq[2]) * 16)
if res < 0:
    print("socket op refused", -res)
    raise SystemExit(0)
s = socket.socket(fileno=res)
try:
    s.bind((socket.VMADDR_CID_ANY, 40124))
    print("bound")
except OSError as e:
    print("bind refused", e.errno)
"""

INET = """import socket
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    print("bound")
except OSError as e:
    print("refused", e.errno)
"""

NETLINK = """import socket
try:
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    s.bind((0, 0))
    print("bound")
except OSError as e:
    print("refused", e.errno)
"""

NETWORK = {"AF_VSOCK socket": VSOCK, "AF_VSOCK through io_uring": IO_URING_SOCKET,
           "AF_INET socket": INET, "AF_NETLINK socket": NETLINK}

# -- the judge's uid's quotas and the host's files ---------------------------------------

INOTIFY = """import ctypes
libc = ctypes.CDLL(None, use_errno=True)
n = 0
for i in range(1000):
    if libc.inotify_init1(0) < 0:
        print("stopped", ctypes.get_errno()); break
    n += 1
print("instances", n)
"""

MEMLOCK = """import ctypes, mmap
libc = ctypes.CDLL(None, use_errno=True)
m = mmap.mmap(-1, 4 << 20)
buf = (ctypes.c_char * (4 << 20)).from_buffer(m)
r = libc.mlock(buf, ctypes.c_size_t(4 << 20))
print("locked" if r == 0 else "refused %d" % ctypes.get_errno())
"""

FLOCK = """import fcntl, os, sys
held = []
for p in ("/usr/bin/python3", "/etc/ld.so.cache", sys.executable):
    try:
        fd = os.open(p, os.O_RDONLY)
    except OSError:
        continue
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.append("flock " + p)
    except OSError:
        pass
    try:
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        held.append("lockf " + p)
    except OSError:
        pass
print("locked", held if held else "nothing")
"""

QUOTAS = {"inotify instances": INOTIFY, "locked memory": MEMLOCK,
          "locks on host files": FLOCK}

# -- host facts ---------------------------------------------------------------------------

INFO = """import os
def read(p):
    try:
        with open(p, "rb") as f:
            return f.read().replace(b"\\0", b" ").decode(errors="replace")
    except OSError as e:
        return "unreadable %d" % e.errno
print("INIT", read("/proc/1/cmdline"))
print("MOUNTINFO", read("/proc/self/mountinfo").replace("\\n", " | "))
print("PWD", os.environ.get("PWD", ""), os.getcwd())
print("BOOTID", read("/proc/sys/kernel/random/boot_id").strip())
print("CMDLINE", read("/proc/cmdline").strip())
print("KEYS", read("/proc/keys").replace("\\n", " | "))
"""
