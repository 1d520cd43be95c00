"""The prompts of the InvBench task (documented in docs/invbench.md): ours, and wonda's.

The model sees the program with ``INVARIANT_MARKER_k();`` lines (see `markers`) and is
asked for one location and one predicate, in a two-line format `answer.parse_answer`
reads.  It is a single user message (no system message), so chat templates of every
model family render it the same way.  The template is versioned: its hash goes into every generate record, so a
changed prompt is visible in the results.

``-o prompt=wonda`` asks as wonda's harness does (`wonda_prompt`, fetched at a pinned
commit): markers at the start of each loop body, one request per marker (its system
prompt, then its user template with the program and the target marker), a JSON answer.
"""

from __future__ import annotations

import hashlib

from veribatch.inference.types import Message, Request, Sampling
from veribatch.tasks.invbench.markers import MARKER

TEMPLATE_VERSION = "invbench-prompt-v1"
PROMPTS = ("ours", "wonda")  # -o prompt=...; the first is the default

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


def wonda_request_id(instance_id: str, label: int) -> str:
    return f"{instance_id}#marker{label}"


def build_wonda_requests(instance_id: str, marked_program: str, labels: list[int],
                         sampling: Sampling) -> list[Request]:
    """One request per marker: wonda's system prompt, its user template with the program
    (markers at body starts) and ``INVARIANT_MARKER_<k>`` as the target."""
    from veribatch.tasks.invbench import wonda_prompt

    prompt = wonda_prompt.load()
    system = Message("system", prompt.system)
    return [Request(id=wonda_request_id(instance_id, k), sampling=sampling,
                    messages=(system, Message("user", prompt.user(marked_program.rstrip(), MARKER.format(k=k)))))
            for k in labels]


def prompt_version(prompt: str) -> str:
    """The run's prompt version (its versions and every generate record's
    ``prompt_template``): our template's hash, or wonda's pin (commit and sha256)."""
    if prompt == "wonda":
        from veribatch.tasks.invbench import wonda_prompt

        return wonda_prompt.version()
    return template_hash()
