"""The REFUTE judge with real g++ and python: limits, sandbox, comparison, compile cache."""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import pytest

from veribatch.tasks.refute.counterexample import (
    REASONS,
    JudgeLimits,
    Judgement,
    Solutions,
    judge_generator,
    judge_input,
)
from veribatch.tasks.refute.search import SearchResult, random_search
from veribatch.verifiers.base import Query
from veribatch.verifiers.judge import (
    STATS,
    CompileError,
    Program,
    Verdict,
    compile_cpp,
    detect_sandbox,
    first_difference,
    outputs_match,
    run_program,
    run_sandboxed,
)
from veribatch.verifiers.registry import get_verifier
from veribatch.verifiers.result import Limits, Status

SUM_CPP = "#include <iostream>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a+b<<\"\\n\";}\n"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One compile cache for the module: each distinct source is compiled once."""
    return tmp_path_factory.mktemp("bin-cache")


def test_token_comparison_follows_the_harness() -> None:
    assert outputs_match("YES\n3 4\n", "yes 3\t4")   # layout and YES/NO case never matter
    assert outputs_match("No\n\n", "NO")
    assert outputs_match("", "\n \n")
    assert not outputs_match("3 4", "34")
    assert not outputs_match("1 2", "1 2 3")
    assert not outputs_match("1.0", "1")  # exact answers: numbers compared as text
    assert not outputs_match("abc", "ABC")  # only YES/NO tokens are case-insensitive
    assert not outputs_match("YES", "NO")
    # the harness's rule (-o compare=harness): YES/NO mode only when every jury token is YES/NO
    assert outputs_match("YES 1 2", "Yes 1 2") and not outputs_match("YES 1 2", "Yes 1 2", "harness")
    assert outputs_match("YES\nno", "yes NO", "harness") and not outputs_match("YES", "1", "harness")
    assert not outputs_match("YES no", "yes", "harness") and outputs_match("", "\n", "harness")
    # per token, also when the answer mixes YES with a construction (the harness did not)
    assert outputs_match("Yes\n1 2", "YES 1 2")
    assert first_difference("1 2 3", "1 5 3") == "token 2: expected '2', found '5'"
    assert first_difference("1 2", "1 2 3") == "expected 2 tokens, found 3"


def test_cpp_runs_and_compile_is_cached(write, cache: Path) -> None:
    src = write("sum.cpp", SUM_CPP)
    run = run_program(Program.of(src), "2 40\n", cache_dir=cache / "judge-bin")
    assert run.verdict is Verdict.OK and run.output == "42\n"
    hits = STATS.hits
    binary = compile_cpp(src, cache / "judge-bin")
    mtime = binary.stat().st_mtime_ns
    assert compile_cpp(src, cache / "judge-bin") == binary
    assert binary.stat().st_mtime_ns == mtime  # not rebuilt
    assert STATS.hits == hits + 2
    other = compile_cpp(SUM_CPP.replace("a+b", "a-b"), cache / "judge-bin")
    assert other != binary


def test_compile_error_names_the_problem(write, cache: Path) -> None:
    with pytest.raises(CompileError, match="undeclared|not declared"):
        compile_cpp(write("bad.cpp", "int main(){ return y; }"), cache / "judge-bin")


def test_python_program_and_runtime_error(write) -> None:
    ok = run_program(Program.of(write("p.py", "print(sum(map(int, input().split())))")), "1 2 3")
    assert ok.verdict is Verdict.OK and ok.output == "6\n"
    bad = run_program(Program.of(write("e.py", "raise SystemExit(3)")), "")
    assert bad.verdict is Verdict.RE and bad.returncode == 3


def test_hanging_program_is_tle(write, cache: Path) -> None:
    t = time.monotonic()
    r = run_program(Program.of(write("hang.cpp", "int main(){volatile long x=0;for(;;)x++;}")), "",
                    time_s=0.5, cache_dir=cache / "judge-bin")
    assert r.verdict is Verdict.TLE
    sleeper = run_program(Program.of(write("sleep.py", "import time; time.sleep(60)")), "",
                          time_s=0.5)
    assert sleeper.verdict is Verdict.TLE and sleeper.termination_reason == "walltime"
    assert time.monotonic() - t < 10


def test_a_failed_allocation_is_the_program_s_own_exit(write, cache: Path) -> None:
    # RLIMIT_AS refuses the allocation; the program then aborts (bad_alloc) or exits 1
    # (MemoryError) by itself: RE like any crash, the verdict read from the exit, not stderr
    cpp = ("#include <vector>\n#include <cstdio>\nint main(){std::vector<std::vector<char>> v;"
           "for(int i=0;i<100;i++)v.emplace_back(50<<20,1);printf(\"%zu\\n\",v.size());}")
    r = run_program(Program.of(write("alloc.cpp", cpp)), "", memory_mb=128, cache_dir=cache / "judge-bin")
    assert r.verdict is Verdict.RE and r.signal == 6 and "bad_alloc" in r.stderr, r
    py = run_program(Program.of(write("alloc.py", "x = bytearray(10**9)")), "", memory_mb=128)
    assert py.verdict is Verdict.RE and py.returncode == 1 and "MemoryError" in py.stderr, py


def test_stderr_text_and_size_never_decide_the_verdict(write) -> None:
    # a correct run that prints the words of a memory error, or floods stderr past the
    # output cap, is OK with its stdout intact
    words = write("words.py", "import sys\nsys.stderr.write('MemoryError std::bad_alloc "
                              "Cannot allocate memory\\n')\nprint(sum(map(int, input().split())))\n")
    r = run_program(Program.of(words), "1 2")
    assert r.verdict is Verdict.OK and r.output == "3\n", r
    flood = write("flood_err.py", "import sys\nfor _ in range(3000): sys.stderr.write('d' * 1000)\n"
                                  "print(42)\n")
    r = run_program(Program.of(flood), "", output_cap=1 << 20)
    assert r.verdict is Verdict.OK and r.output == "42\n", (r.verdict, r.reason)
    assert len(r.stderr) <= 4000


def test_forked_children_are_killed(write, tmp_path: Path) -> None:
    marker = f"veribatch-fork-{uuid.uuid4().hex[:8]}"
    code = ("import os, time, sys\n"
            "for _ in range(4):\n"
            "    if os.fork() == 0:\n"
            f"        os.execvp('sleep', ['sleep', '1000', '{marker}'])\n"
            "print('parent done')\n")
    # a judged program may not fork at all (the language's system-call allow-list)
    r = run_program(Program.of(write("fork.py", code)), "")
    assert r.verdict is Verdict.RE and "PermissionError" in r.stderr, r
    # the compiler's filter lets it fork: what it leaves behind dies with the box
    ex = run_sandboxed(["/usr/bin/python3", "-I", "-S", "fork.py"], {"fork.py": code.encode()},
                       Limits(wall_s=20, cpu_s=5, memory_mb=256), stdin_path=None,
                       stdout_path=tmp_path / "out", stderr_path=tmp_path / "err",
                       output_cap=1 << 16, syscalls=None)
    assert ex.returncode == 0 and ex.read_output() == "parent done\n", ex.read_stderr()
    assert _alive(marker) == []


def _alive(marker: str, timeout: float = 3.0) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in psutil.process_iter(["cmdline"])
                 if marker in " ".join(p.info["cmdline"] or [])]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def test_stdout_flood_is_ole(write) -> None:
    r = run_program(Program.of(write("flood.py", "while True: print('x' * 1000)")), "",
                    output_cap=1 << 20)
    assert r.verdict is Verdict.OLE and r.output == ""


def test_programs_run_isolated_and_say_so(write) -> None:
    """The full escape suite is tests/verifiers/judge/test_escape.py; here: the record says where
    it ran, and the box sees neither this file system nor the network."""
    box = detect_sandbox()
    assert box.kind == "bwrap" and box.network_isolated and box.fs_isolated and not box.unsafe
    r = run_program(Program.of(write("look.py", f"import os; print(os.path.exists({__file__!r}))")), "")
    assert r.verdict is Verdict.OK and r.output == "False\n"
    assert r.sandbox == "bwrap" and not r.unsafe and r.network_isolated


def test_compiler_sees_no_host_files(cache: Path) -> None:
    with pytest.raises(CompileError, match="No such file") as e:
        compile_cpp('#include "/etc/hostname"\nint main(){}\n', cache / "judge-bin")
    hostname = Path("/etc/hostname").read_text().strip()
    assert hostname not in str(e.value).replace("/etc/hostname", "")


def test_judge_tool_through_the_registry(
    write, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERIBATCH_CACHE", str(cache))
    v = get_verifier("judge", cache_dir=tmp_path / "vcache")
    src, inp = write("sum.cpp", SUM_CPP), write("in.txt", "20 22\n")
    good, wrong = write("good.txt", "42"), write("wrong.txt", "41")
    r = v.run(Query((src, inp, good), property="judge"), Limits(60), tmp_path / "logs")
    assert r.status is Status.TRUE and r.extras["verdict"] == "OK"
    assert r.extras["output"] == "42\n" and r.extras["matches_expected"] is True
    r = v.run(Query((src, inp, wrong), property="judge"), Limits(60), tmp_path / "logs")
    assert r.status is Status.FALSE and "differs" in (r.reason or "")
    ce = v.run(Query((write("ce.cpp", "int main({"), inp), property="judge"), Limits(60),
               tmp_path / "logs")
    assert ce.status is Status.FALSE and ce.extras["verdict"] == "CE"


# ---------------------------------------------------------------- counterexample judgement

CORRECT = "n = int(input())\na = list(map(int, input().split()))\nprint(sum(a))\n"
# wrong: n == 3 off by one, n == 4 crash, n == 5 hang, n == 6 wrong on about half the runs
WRONG = """import os, sys
n = int(input())
a = list(map(int, input().split()))
if n == 3:
    print(sum(a) + 1)
elif n == 4:
    sys.exit(7)
elif n == 5:
    while True:
        pass
elif n == 6 and os.urandom(1)[0] % 2:
    print(-1)
else:
    print(sum(a))
"""
VALIDATOR = """import sys
lines = sys.stdin.read().split("\\n")
n = int(lines[0])
assert 1 <= n <= 8, "n out of range"
a = list(map(int, lines[1].split()))
assert len(a) == n and all(0 <= x <= 100 for x in a), "bad array"
"""
CORRECT_FAILS_ON_7 = CORRECT.replace("print(sum(a))", "assert n != 7\nprint(sum(a))")


@pytest.fixture
def problem(write) -> Solutions:
    return Solutions(wrong=Program.of(write("wrong.py", WRONG)),
                     correct=Program.of(write("correct.py", CORRECT)),
                     validator=Program.of(write("validator.py", VALIDATOR)))


def _judge(problem: Solutions, data: str, **limits: object) -> Judgement:
    return judge_input(problem, data.encode(), JudgeLimits(**limits), cache_dir=None,  # type: ignore[arg-type]
                       sandbox=detect_sandbox())


def test_every_judgement_has_a_named_reason(problem: Solutions, write) -> None:
    same = _judge(problem, "2\n1 2\n")
    assert (same.outcome, same.reason, same.runs) == ("failure", "same_output", 5)
    differs = _judge(problem, "3\n1 2 3\n")
    assert (differs.outcome, differs.reason, differs.runs) == ("success", "differs", 1)
    assert differs.detail == "token 1: expected '6', found '7'"
    assert differs.correct_output_excerpt == "6\n" and differs.wrong_output_excerpt == "7\n"
    crash = _judge(problem, "4\n1 2 3 4\n")
    assert (crash.outcome, crash.reason, crash.wrong_verdict) == ("success", "wrong_crash", "RE")
    hang = _judge(problem, "5\n1 2 3 4 5\n", run_s=1.0)
    # a success only with the CPU limit used up; a loaded node may leave it short of that,
    # twice, and then it is inconclusive (an error), never a success
    assert (hang.outcome, hang.reason, hang.wrong_verdict) in (
        ("success", "wrong_timeout", "TLE"), ("error", "wrong_inconclusive", "TLE")), hang
    invalid = _judge(problem, "9\n1 2 3 4 5 6 7 8 9\n")
    assert (invalid.outcome, invalid.reason) == ("failure", "invalid_input")
    assert "n out of range" in invalid.detail and invalid.correct_verdict is None
    assert _judge(problem, " \n").reason == "empty_input"
    assert invalid.input_bytes == 20 and invalid.input_sha256 and invalid.sandbox == "bwrap"
    broken = Solutions(problem.wrong, Program.of(write("c7.py", CORRECT_FAILS_ON_7)), problem.validator)
    err = judge_input(broken, b"7\n1 1 1 1 1 1 1\n", JudgeLimits(), cache_dir=None,
                      sandbox=detect_sandbox())
    assert (err.outcome, err.reason, err.correct_verdict) == ("error", "correct_failed", "RE")
    assert err.wrong_verdict is None  # never judged against a failing reference
    assert {j.reason for j in (same, differs, crash, hang, invalid, err)} <= set(REASONS)


def test_the_model_program_is_run_first(problem: Solutions, write, cache: Path) -> None:
    box = detect_sandbox()

    def gen(name: str, code: str, **limits: object) -> Judgement:
        return judge_generator(problem, Program.of(write(name, code)), JudgeLimits(**limits),  # type: ignore[arg-type]
                               cache_dir=cache / "judge-bin", sandbox=box)

    ok = gen("g.py", "print(3)\nprint('5 5 5')\n")
    assert ok.success and ok.reason == "differs" and ok.generator_verdict == "OK"
    cpp = gen("g.cpp", '#include <cstdio>\nint main(){puts("3");puts("0 0 1");}\n')
    assert cpp.success and cpp.input_excerpt == "3\n0 0 1\n"
    assert gen("crash.py", "raise ValueError('x')").reason == "generator_crash"
    assert gen("slow.py", "import time\ntime.sleep(30)", generator_s=1.0).reason == "generator_timeout"
    ce = gen("bad.cpp", "int main( {")
    assert (ce.outcome, ce.reason) == ("failure", "generator_compile_error")
    assert gen("quiet.py", "pass").reason == "empty_input"


def test_nondeterministic_wrong_solutions_need_several_runs(problem: Solutions) -> None:
    """n == 6 makes the wrong solution fail on about half of its runs: with 5 runs per input
    (the harness's runs_per_eval) nearly every judgement succeeds, with 1 about half do.
    Thresholds: each assertion fails by chance with probability < 6e-4."""
    data = b"6\n1 2 3 4 5 6\n"
    box = detect_sandbox()

    def trial(runs: int) -> Judgement:
        return judge_input(problem, data, JudgeLimits(runs=runs), cache_dir=None, sandbox=box,
                           validated=True)

    five = [trial(5) for _ in range(30)]
    one = [trial(1) for _ in range(30)]
    assert sum(j.success for j in five) >= 25
    assert sum(j.success for j in one) <= 24
    assert any(j.success and j.runs > 1 for j in five)
    assert all(j.runs <= 5 for j in five) and all(j.runs == 1 for j in one)


# ---------------------------------------------------------------- RandSearch

GEN_RANDOM = "import random\nn = random.randint(1, 3)\nprint(n)\nprint(*[random.randint(0, 9) for _ in range(n)])\n"


def _search(problem: Solutions, generator, reference: Program | None = None, *, time_s: float = 20,
            validator: Program | None = None, stall_after: int = 8) -> SearchResult:
    return random_search(problem.wrong, reference or problem.correct, generator, time_s=time_s,
                         limits=JudgeLimits(run_s=2.0, generator_s=2.0), cache_dir=None,
                         sandbox=detect_sandbox(), validator=validator, stall_after=stall_after)


def test_randsearch_finds_and_stops(problem: Solutions, write) -> None:
    found = _search(problem, Program.of(write("gen.py", GEN_RANDOM)))
    assert found.reason == "found" and found.found is not None and found.found.startswith(b"3")
    assert found.found_by == "differs" and found.iterations >= 1
    # the found input is then judged like any other
    assert _judge(problem, found.found.decode()).success


def test_randsearch_failure_modes(problem: Solutions, write) -> None:
    small = Program.of(write("small.py", "import random\nprint(2)\nprint(random.randint(0, 1), 1)\n"))
    stalled = _search(problem, small)
    assert stalled.reason == "no_new_inputs" and stalled.distinct == 2
    assert stalled.iterations >= 10  # 8 draws in a row without a new input, each still run
    fixed = Program.of(write("fixed.py", "import random\nprint(2)\nprint(random.randint(0, 10**9), 1)\n"))
    nothing = _search(problem, fixed, time_s=1.5)
    assert nothing.reason == "nothing_found" and nothing.iterations >= 1 and nothing.found is None
    crashing = Program.of(write("brute.py", "raise SystemExit(1)"))
    assert _search(problem, fixed, crashing).reason == "brute_crash"
    assert _search(problem, Program.of(write("g.cpp", "int main({"))).reason == "generator_compile_error"
    assert _search(problem, Program.of(write("gc.py", "1/0"))).reason == "generator_crash"


def test_randsearch_in_loop_validation_and_callable_generators(problem: Solutions) -> None:
    draws: list[int] = []

    def draw(i: int) -> bytes:  # odd draws invalid (n = 9), even draws the bug (n = 3)
        draws.append(i)
        return b"9\n0 0 0 0 0 0 0 0 %d\n" % i if i % 2 else b"3\n1 2 %d\n" % i

    r = _search(problem, draw, validator=problem.validator)
    assert r.reason == "found" and r.found == b"3\n1 2 2\n" and r.invalid_skipped == 1
    # a repeated input is run again: a nondeterministic wrong solution (n = 6) fails on some run
    nd = _search(problem, lambda i: b"6\n1 1 1 1 1 1\n", stall_after=20)  # misses: p = 2^-21
    assert nd.reason == "found" and nd.distinct == 1 and nd.found_by == "differs"
    # without the validator the search stops at the first difference, valid or not (200 > 100)
    r = _search(problem, lambda i: b"3\n1 2 200\n" if i == 1 else b"3\n1 2 3\n")
    assert r.reason == "found" and r.found == b"3\n1 2 200\n" and r.iterations == 1
    assert _judge(problem, r.found.decode()).reason == "invalid_input"


# ---------------------------------------------------------------- no isolation


@pytest.fixture
def no_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A node where bubblewrap exists but cannot create namespaces (a real binary that fails,
    as bwrap does under user.max_user_namespaces=0), and no apptainer."""
    from veribatch.verifiers.judge import sandbox as sb

    where = Path(tempfile.mkdtemp(prefix="veribatch-fake-bwrap-"))  # readable by the dropped uid
    where.chmod(0o755)
    fake = where / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv(sb.BWRAP_ENV, str(fake))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    for var in (sb.IMAGE_ENV, sb.IN_IMAGE_ENV, "VERIBATCH_APPTAINER"):
        monkeypatch.delenv(var, raising=False)
    sb.detect_sandbox.cache_clear()
    yield
    sb.detect_sandbox.cache_clear()
    shutil.rmtree(where, ignore_errors=True)


def test_no_isolation_is_refused_unless_explicitly_unsafe(no_bwrap, write, tmp_path: Path,
                                                         prompts_server: Path) -> None:
    from veribatch.launch.run_control import plan_run
    from veribatch.verifiers.judge import SandboxUnavailable

    with pytest.raises(SandboxUnavailable) as e:
        detect_sandbox("auto")
    msg = str(e.value)
    assert "No permissions to create new namespace" in msg and "max_user_namespaces" in msg
    assert "install bubblewrap" in msg and "sandbox=unsafe" in msg
    with pytest.raises(ValueError, match="no sandbox for untrusted code"):
        plan_run("refute", limit=1, model=f"replay:{tmp_path}")  # a model run: refused at plan time
    plan_run("refute", limit=1)  # shipped programs only: runs unisolated, says so (test_fresh_machine)
    box = detect_sandbox("unsafe")
    assert (box.kind, box.unsafe, box.fs_isolated) == ("none", True, False)
    r = run_program(Program.of(write("p.py", "print(6 * 7)")), "", sandbox=box)
    assert r.verdict is Verdict.OK and r.output == "42\n" and r.unsafe and r.sandbox == "none"


def test_the_command_lines_each_sandbox_kind_builds(tmp_path: Path) -> None:
    """apptainer cannot run here: its command line is what is under test."""
    from veribatch.verifiers.judge.sandbox import _START, MAX_PROCESSES, Sandbox

    start = ["/bin/sh", "-c", _START, "veribatch-start"]  # says "started" on the status fd

    out = tmp_path / "out"
    app = Sandbox("apptainer", True, True, None, executable="/usr/bin/apptainer",
                  image="/img/judge.sif", prlimit="/usr/bin/prlimit")
    cmd, cwd = app.command(["./prog"], tmp_path, ["prog"], {"out": out})
    assert cmd == ["/usr/bin/apptainer", "exec", "--containall", "--cleanenv", "--no-home", "--net",
                   "--network", "none", "--bind", f"{tmp_path}:/box", "--bind", f"{out}:/box/out",
                   "--pwd", "/box", "/img/judge.sif", "/usr/bin/prlimit",
                   f"--nproc={MAX_PROCESSES}:{MAX_PROCESSES}", "--", *start, "./prog"] \
        and cwd == tmp_path
    bw = Sandbox("bwrap", True, True, 65534, executable="/usr/bin/bwrap", prlimit="/usr/bin/prlimit",
                 drop=("setpriv", "--reuid=65534", "--"))
    cmd, _ = bw.command(["./prog"], tmp_path, ["prog"], {"out": out}, box_mb=8)
    assert cmd[:4] == ["setpriv", "--reuid=65534", "--", "/usr/bin/bwrap"]
    assert "--unshare-all" in cmd and "--die-with-parent" in cmd and "--new-session" in cmd
    joined = " ".join(cmd)
    # the three writable tmpfs hold box_mb together; the root and /dev are read-only
    assert f"--size {2 * 2**20} --tmpfs /box" in joined and f"--size {4 * 2**20} --tmpfs /tmp" in joined
    assert f"--size {2 * 2**20} --tmpfs /dev/shm" in joined
    assert "--remount-ro /dev --remount-ro /" in joined
    assert "--seccomp" not in joined and "--disable-userns" not in joined  # not asked for here
    sec = Sandbox("bwrap", True, True, None, executable="/usr/bin/bwrap", seccomp=True,
                  userns_disabled=True)
    sec_cmd = " ".join(sec.command(["./prog"], tmp_path, ["prog"], {}, box_mb=8)[0])
    assert "--unshare-user --disable-userns" in sec_cmd and "--seccomp 9" in sec_cmd
    # the box's files are copied in from descriptors: no host path in the box's mountinfo
    assert "--perms 0555 --ro-bind-data 6 /box/prog" in joined and f"--bind {out} /box/out" in joined
    assert "/home" not in joined and "/etc/passwd" not in joined and "/etc/hostname" not in joined
    assert cmd[-11:] == ["--chdir", "/box", "--", "/usr/bin/prlimit",
                         f"--nproc={MAX_PROCESSES}:{MAX_PROCESSES}", "--", *start, "./prog"]
