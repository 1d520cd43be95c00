"""A stand-in for the `dafny` binary that replays REAL recorded Dafny output.

Dafny 4.10 cannot run on the development and CI machines.  To test the verify stage's
plumbing (command lines, resolve-then-verify, the result cache, records, Table 1/2) this
script answers each `dafny resolve|verify ... program.dfy` with the output Dafny itself
printed for one of the recorded cases in ../shared/data/recorded/dafny, chosen by the
sha256 of the program through a JSON map (``$DAFNY_REPLAY_MAP``: {sha256: case}), and with
that case's exit code.  Two texts are not recordings: ``--version`` prints the release's
version string (``$DAFNY_REPLAY_VERSION``, default 4.10.0), and a `dafny resolve` that succeeds prints the trailer the recorded
README documents ("Dafny program verifier did not attempt verification").  Every call's
argv is appended to ``$DAFNY_REPLAY_LOG`` so tests can check the command lines.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

EXIT = {"verified_ok": 0, "assume_warning": 2, "trigger_warning": 0, "parse_error_resolve": 2,
        "parse_error_verify": 2, "parse_function_method": 2, "resolution_type_error": 2,
        "resolution_method_in_expr": 2}  # every other recorded case exits 4 (command.txt)
NO_RESOLVE = ("parse_error_resolve", "parse_error_verify", "parse_function_method",
              "resolution_type_error", "resolution_method_in_expr")


def main(argv: list[str]) -> int:
    with open(os.environ["DAFNY_REPLAY_LOG"], "a") as log:
        log.write(json.dumps(argv) + "\n")
    if argv == ["--version"]:
        print(os.environ.get("DAFNY_REPLAY_VERSION", "4.10.0"))
        return 0
    command, program = argv[0], Path(argv[-1])
    digest = hashlib.sha256(program.read_bytes()).hexdigest()
    case = json.loads(Path(os.environ["DAFNY_REPLAY_MAP"]).read_text())[digest]
    recorded = Path(os.environ["DAFNY_REPLAY_RECORDED"]) / case
    (expect,) = recorded.glob("*.dfy.v4.10.0.expect")
    if command == "resolve" and case not in NO_RESOLVE:
        print("\nDafny program verifier did not attempt verification")
        return 0
    sys.stdout.write(expect.read_text())
    return EXIT.get(case, 4)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
