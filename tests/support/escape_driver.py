"""Run escape attempts through the judge's sandbox and print what happened, as JSON.

Started by `tests/verifiers/judge/test_escape.py` as an unprivileged user (and as root), so the
sandbox is exercised the way a normal cluster user would run it.  Usage:

    python escape_driver.py SPEC.json      (SPEC: {"marker", "port", "home_secret", "outside"})
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from veribatch.verifiers.judge import (
    CompileError,
    Program,
    compile_cpp,
    detect_sandbox,
    run_program,
    run_sandboxed,
)
from veribatch.verifiers.judge.sandbox import sandbox_report
from veribatch.verifiers.result import Limits


def attacks(spec: dict) -> dict[str, tuple[str, str]]:
    m, port = spec["marker"], spec["port"]
    secret, outside = spec["home_secret"], spec["outside"]
    home = str(Path(secret).parent)
    return {
        "fork_bomb_py": ("py", f"""import os, time
# {m}
while True:
    try:
        os.fork()
    except OSError:
        time.sleep(0.001)
"""),
        "fork_bomb_cpp": ("cpp", f"""#include <unistd.h>
// {m}
int main(){{ for(;;) fork(); }}
"""),
        "connect_host": ("py", f"""import socket
s = socket.create_connection(("127.0.0.1", {port}), timeout=3)
s.sendall(b"escaped {m}")
print("connected")
"""),
        "connect_internet": ("py", """import socket
socket.create_connection(("1.1.1.1", 53), timeout=3)
print("connected")
"""),
        "write_home": ("py", f"""open({home + '/pwned-' + m!r}, "w").write("x")
print("wrote")
"""),
        "write_outside": ("py", f"""open({outside + '/pwned-' + m!r}, "w").write("x")
print("wrote")
"""),
        "write_tmp": ("py", f"""open("/tmp/pwned-{m}", "w").write("x")
print(open("/tmp/pwned-{m}").read())
"""),
        "read_home": ("py", f"""print(open({secret!r}).read())
"""),
        "read_etc": ("py", """import os
for p in ("/etc/hostname", "/etc/passwd", "/etc/shadow"):
    try:
        print(p, open(p).read()[:200])
    except OSError as e:
        print(p, "blocked", e.errno)
print(sorted(os.listdir("/")))
"""),
        "sleep_forever": ("py", f"""import time
# {m}
time.sleep(100000)
"""),
        "daemon": ("py", f"""import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["{m}", "1000"])  # argv[0] carries the marker
    os._exit(0)
print("parent done")
"""),
        "huge_output": ("py", """import sys
chunk = "x" * 65536
while True:
    sys.stdout.write(chunk)
"""),
        "fill_disk": ("py", """import os
n = 0
try:
    for i in range(1000):
        with open(f"/box/f{i}", "wb") as f:
            f.write(b"x" * (8 << 20))
        n += 1
finally:
    print("files", n)
"""),
    }


def main() -> int:
    spec = json.loads(Path(sys.argv[1]).read_text())
    box = detect_sandbox()
    work = Path(spec["work"])
    cache = Path(os.environ["VERIBATCH_CACHE"]) / "judge-bin"
    out: dict = {"sandbox": sandbox_report(box), "euid": os.geteuid(), "attacks": {}}
    for name, (lang, code) in attacks(spec).items():
        src = work / f"{name}.{lang}"
        src.write_text(code)
        t = time.monotonic()
        try:
            r = run_program(Program.of(src), "", time_s=2, memory_mb=256, cache_dir=cache,
                            output_cap=1 << 20, sandbox=box)
            out["attacks"][name] = {"verdict": str(r.verdict), "output": r.output[:2000],
                                    "stderr": r.stderr[-2000:], "reason": r.reason,
                                    "wall_s": time.monotonic() - t,
                                    "termination": r.termination_reason}
        except CompileError as e:
            out["attacks"][name] = {"verdict": "CE", "stderr": str(e)[-2000:]}
    # the compiler's filter lets a box fork: its setsid'd grandchild must die with it too
    daemon = attacks(spec)["daemon"][1].encode()
    ex = run_sandboxed(["/usr/bin/python3", "-I", "-S", "daemon.py"], {"daemon.py": daemon},
                       Limits(wall_s=10, cpu_s=2, memory_mb=256), stdin_path=None,
                       stdout_path=work / "daemon.out", stderr_path=work / "daemon.err",
                       output_cap=1 << 16, sandbox=box, syscalls=None)
    out["attacks"]["daemon_forks_allowed"] = {"returncode": ex.returncode,
                                              "output": ex.read_output()[:2000]}
    leaks = {}
    for name, path in (("include_hostname", "/etc/hostname"), ("include_secret", spec["home_secret"])):
        try:
            compile_cpp(f'#include "{path}"\nint main(){{}}\n', cache, sandbox=box)
            leaks[name] = {"compiled": True, "message": ""}
        except CompileError as e:
            leaks[name] = {"compiled": False, "message": str(e)}
    out["compile"] = leaks
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
