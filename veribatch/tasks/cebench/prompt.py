"""The three prompting strategies of CE-Bench §4 (zero-shot, dual-label one-shot, CoT).

The paper's templates (its Appendix A) are not in our copy of the text, so these are
written from §4's description and versioned: each strategy's template hash is part of the
run id (`CEBenchTask.versions`), so changing a word makes a new run, never a mix.

All three show the same thing: the program as `instrument.prompt_program` renders it (the
post-condition dropped, a ``CHECK POINT`` comment where the state is asserted), the state
as ``x = 1, y = 0``, and the question.  The model is not told the counterexample's
category or where it came from (§3.2.2).  It is one user message, no system message, so
every chat template renders it alike.  The one-shot example is fixed: one program written
for veribatch with one GENUINE and one SPURIOUS state, labelled (its labels are checked by
the embedded verifier in the tests).
"""

from __future__ import annotations

import hashlib

from veribatch.inference.types import Message, Request, Sampling

TEMPLATE_VERSION = "cebench-prompt-v1"
LABELS = ("GENUINE", "SPURIOUS")

INTRO = """\
You are an expert in program verification. Below is a C program with one loop. \
`__VERIFIER_nondet_int()` returns an arbitrary integer (an input of the program), and \
`assume_abort_if_not(c)` stops every execution in which `c` is false.

A counterexample proposed during loop invariant inference is a program state: a value for \
every variable. It is GENUINE if some execution of the program reaches the line marked \
CHECK POINT with exactly these values, and SPURIOUS if no execution does."""

TASK = """\
```c
{program}```

State at the CHECK POINT: {state}"""

ZERO_SHOT = INTRO + "\n\n" + TASK + """

Is this counterexample GENUINE or SPURIOUS? Answer with one word: GENUINE or SPURIOUS."""

EXAMPLE_PROGRAM = """\
int main()
{
  int i = 0;
  int n = __VERIFIER_nondet_int();
  assume_abort_if_not((n >= 0) && (n <= 100));
  while (i < n)
  {
    // <-- CHECK POINT: is the state reachable here?
    i = i + 2;
  }

}
"""
# (state, label, why) — checked by the embedded verifier in tests/tasks/cebench.
EXAMPLE_STATES = (
    ({"i": 4, "n": 7}, "GENUINE", "with n = 7 the loop reaches the CHECK POINT with i = 0, 2, 4 and 6"),
    ({"i": 3, "n": 7}, "SPURIOUS", "i starts at 0 and grows by 2, so it is always even"),
)

ONE_SHOT = INTRO + """

Here is an example with one GENUINE and one SPURIOUS counterexample.

```c
{example}```

State at the CHECK POINT: {example_genuine}
Answer: GENUINE ({why_genuine})

State at the CHECK POINT: {example_spurious}
Answer: SPURIOUS ({why_spurious})

Now the program to judge.

""" + TASK + """

Is this counterexample GENUINE or SPURIOUS? Answer with one word: GENUINE or SPURIOUS."""

COT = INTRO + "\n\n" + TASK + """

Is this counterexample GENUINE or SPURIOUS? Think step by step: which values can the \
variables have when execution reaches the CHECK POINT? Then give your final answer on the \
last line, exactly as `Answer: GENUINE` or `Answer: SPURIOUS`."""

TEMPLATES = {"zero-shot": ZERO_SHOT, "one-shot": ONE_SHOT, "cot": COT}
# Default completion budgets.  A one-word answer needs little, but the paper's strongest
# models (GPT-5.2, DeepSeek-V3.2) reason before answering, and a reasoning model cut at a few
# hundred tokens leaves no label at all (counted as unparsable, i.e. wrong): the budget is
# sized for reasoning, and cut answers are counted apart (RQ1's ``truncated``).  A model that
# answers at once stops long before it.
MAX_TOKENS = {"zero-shot": 4096, "one-shot": 4096, "cot": 8192}


def state_text(state: dict[str, int]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in state.items())


def user_prompt(strategy: str, program: str, state: dict[str, int]) -> str:
    template = TEMPLATES[strategy]
    fields = {"program": program if program.endswith("\n") else program + "\n", "state": state_text(state)}
    if strategy == "one-shot":
        (g_state, _, g_why), (s_state, _, s_why) = EXAMPLE_STATES
        fields.update(example=EXAMPLE_PROGRAM, example_genuine=state_text(g_state), why_genuine=g_why,
                      example_spurious=state_text(s_state), why_spurious=s_why)
    return template.format(**fields)


def template_hash(strategy: str) -> str:
    if strategy not in TEMPLATES:
        raise KeyError(f"unknown strategy {strategy!r}; known: {', '.join(TEMPLATES)}")
    extra = repr(EXAMPLE_STATES) + EXAMPLE_PROGRAM if strategy == "one-shot" else ""
    return hashlib.sha256((TEMPLATE_VERSION + strategy + TEMPLATES[strategy] + extra).encode()).hexdigest()[:16]


def build_request(instance_id: str, strategy: str, program: str, state: dict[str, int],
                  sampling: Sampling) -> Request:
    return Request(id=instance_id, messages=(Message("user", user_prompt(strategy, program, state)),),
                   sampling=sampling)
