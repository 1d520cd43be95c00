"""What several test files share, in one place: plain modules, imported as
``tests.support.<module>`` (fixtures stay in the conftest.py of the folder that uses them).

- `cli`: `launch ...` in a fresh process, and readers of the run directory it writes;
- `archive_server`: a local codeload.github.com for the pinned-download tests;
- `browser`: headless Chromium over the DevTools protocol (the report page);
- `cebench_gcc`: gcc as the independent judge of CE-Bench states;
- `refute_tiny`: the tiny model's REFUTE answers and options;
- `z3c_programs`: C programs with known verdicts for the embedded verifier;
- `escape_suite` (also a script) and `escape_driver`: attacks on the judge's box;
- `dafny_replay`: a stand-in `dafny` that replays recorded real Dafny 4.10 output.
"""

from pathlib import Path

DIR = Path(__file__).resolve().parent  # the scripts here are run by path
REPO = DIR.parents[1]  # the checkout under test (what a child's PYTHONPATH names)
