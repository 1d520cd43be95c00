"""The one prompt template of the InvBench task (documented in docs/invbench.md).

The model sees the program with ``INVARIANT_MARKER_k();`` lines (see `markers`) and is
asked for one location and one predicate, in a two-line format `answer.parse_answer`
reads.  It is a single user message (no system message), so chat templates of every
model family render it the same way.  The template is versioned: its hash goes into every generate record, so a
changed prompt is visible in the results.
"""

from __future__ import annotations

import hashlib

from veribatch.inference.types import Message, Request, Sampling

TEMPLATE_VERSION = "invbench-prompt-v1"

USER = """\
You are an expert in program verification. The C program below must never call reach_error(). Propose ONE loop invariant that helps a \
verifier prove this.

Each loop is preceded by a line INVARIANT_MARKER_k(); naming its location k. An invariant at \
INVARIANT_MARKER_k must hold every time execution reaches the head of loop k: on entry and \
after every iteration, before the loop condition is evaluated. Write the invariant as a \
side-effect-free C boolean expression over the variables in scope there (no assignments, \
no ++/--, no function calls).

```c
{program}
```

Answer with exactly these two lines and nothing else:
location: INVARIANT_MARKER_<k>
invariant: <C boolean expression>"""


def user_prompt(marked_program: str) -> str:
    return USER.format(program=marked_program.rstrip())


def template_hash() -> str:
    return hashlib.sha256((TEMPLATE_VERSION + USER).encode()).hexdigest()[:16]


def build_request(instance_id: str, marked_program: str, sampling: Sampling) -> Request:
    return Request(
        id=instance_id,
        messages=(Message("user", user_prompt(marked_program)),),
        sampling=sampling,
    )
