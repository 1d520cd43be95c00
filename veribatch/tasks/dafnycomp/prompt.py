"""The prompt template of the DafnyComp task (versioned; documented in docs/dafnycomp.md).

The paper evaluates every model with one unified prompt (§3.3, Appendix G); the box holding
it did not survive in our copy of the paper, and ReForm's repository has no evaluation
prompt, only the instruction its fine-tuning data uses (``SYS_DAFNY``/
``GEN_HINTS_FROM_BODY`` in ``LLaMA-Factory/dafny_process/src/build_sft_data_from_json.py``:
"an expert in Dafny ... return a complete Dafny program ... only code").  This template
keeps that spirit — the whole stripped program in, the whole program back in one fenced
block — and states DafnyComp's own rules: only the contract clauses may be written, nothing
else changed, no ways around the verifier.  It is one user message (no system message), so
every model family's chat template renders it the same way.  Its hash is the ``prompt``
entry of `Task.versions`, part of the run id.
"""

from __future__ import annotations

import hashlib

from veribatch.inference.types import Message, Request, Sampling

TEMPLATE_VERSION = "dafnycomp-prompt-v1"

USER = """\
You are an expert in Dafny, a verification-aware programming language. The Dafny program \
below is made of several methods and functions that call one another. Its specifications \
were removed: every requires, ensures, reads, modifies and decreases clause that stood \
between a signature and its opening brace. Loop invariants, assertions and all code are \
still there.

Write the specifications back so that Dafny 4 verifies the whole program: each contract \
must hold for its own body and give its callers what they need.

Rules:
- Only add requires, ensures, reads, modifies and decreases clauses before the opening \
brace of methods, functions, predicates and lemmas.
- Change nothing else: no new or removed methods, functions or lemmas, no changed \
signatures or bodies, and no assume, {{:axiom}}, {{:verify false}} or {{:extern}}.

```dafny
{program}
```

Answer with the complete program in one ```dafny code block."""


# `-o strip=reform`: the program lost its loop invariants, asserts, assumes and comments too
# (`strip_reform`), so the template says so and lets them be written back, in ReForm's words
# where it has some ("the strongest possible annotation (loop invariants, assert statements,
# etc.)"); the rules against ways around the verifier stay.
REFORM_VERSION = "dafnycomp-prompt-reform-v1"
USER_REFORM = """\
You are an expert in Dafny, a verification-aware programming language. The Dafny program \
below is made of several methods and functions that call one another. Its annotations were \
removed: every requires, ensures, invariant, assert, modifies, assume, reads and decreases \
line, and every comment. All code is still there.

Write the annotations back so that Dafny 4 verifies the whole program: contracts that hold \
for their own bodies and give their callers what they need, and the loop invariants and \
assertions their proofs need.

Rules:
- Only add requires, ensures, reads, modifies and decreases clauses before the opening \
brace of methods, functions, predicates and lemmas, and loop invariants, loop decreases \
and assert statements inside bodies.
- Change nothing else: no new or removed methods, functions or lemmas, no changed \
signatures or code, and no assume, {{:axiom}}, {{:verify false}} or {{:extern}}.

```dafny
{program}
```

Answer with the complete program in one ```dafny code block."""

TEMPLATES = {"contracts": (TEMPLATE_VERSION, USER), "reform": (REFORM_VERSION, USER_REFORM)}


def user_prompt(stripped_program: str, strip: str = "contracts") -> str:
    return TEMPLATES[strip][1].format(program=stripped_program.strip("\n"))


def template_hash(strip: str = "contracts") -> str:
    version, text = TEMPLATES[strip]
    return hashlib.sha256((version + text).encode()).hexdigest()[:16]


def build_request(instance_id: str, stripped_program: str, sampling: Sampling,
                  strip: str = "contracts") -> Request:
    return Request(id=instance_id, messages=(Message("user", user_prompt(stripped_program, strip)),),
                   sampling=sampling)
