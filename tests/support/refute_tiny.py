"""The tiny Qwen2 model trained to answer REFUTE prompts of the sample (shared by the run tests).

All its lessons are on one problem, S12 (floor of a square root; the wrong solution uses a
double), one per strategy, so the model only has to tell the strategies apart by how their
prompts end — a few seconds of training, where six problems would take minutes:
zero-shot → a counterexample; oracle → an input that breaks the constraints; agentic → one
execution, then a submission; RandSearch → brute force + generator; RandSearch-oracle → a
generator.  Every other prompt (the other eleven problems) gets junk, which the answer
parser must record as such.
"""

from __future__ import annotations

from typing import Any

from veribatch.tasks.refute import RefuteTask, data
from veribatch.tasks.refute.prompt import feedback, user_prompt

PROBLEM = "S12"
ZERO_SHOT = "A double cannot hold 10^18 - 1.\n```python\nprint(10**18 - 1)\n```"
ORACLE = "```python\nprint(0)\n```"  # n = 0 breaks 1 <= n: the validator rejects it
AGENT_T1 = "```python\nimport math\nprint(math.sqrt(10**18 - 1))\n```\nACTION: EXECUTE"
AGENT_OUT = "1000000000.0\n"
AGENT_T2 = "```python\nprint(10**18 - 1)\n```\nACTION: SUBMIT"
GENERATOR = ("```python\nimport random\nk = random.randint(10**8, 10**9)\n"
             "print(k * k - random.randint(1, 3))\n```")
RANDSEARCH = ("Brute force:\n```python\nimport math\nprint(math.isqrt(int(input())))\n```\n"
              "Generator:\n" + GENERATOR)
MAX_TOKENS = 96
# answers in the authors' harness format (XML actions), for the run with their templates
XML_ZERO_SHOT = ("<action><name>print_fail_case</name><code>\nprint(10**18 - 1)\n</code>"
                 "<lang>Python 3</lang></action>")


def options(**over: Any) -> dict[str, Any]:
    o = RefuteTask().default_options()
    o.update({"search_s": 10.0, "filter_s": 5.0, "run_s": 5.0, "generator_s": 10.0}, **over)
    return o


def turn2(prompt1: str) -> str:
    """The second agentic turn as one user prompt in the tiny model's ChatML: the engine
    renders [user, assistant, user] to exactly this text after the first user header."""
    reply = feedback("Execution 1: OK.", AGENT_OUT, "9 execution(s) left.")
    return (f"{prompt1}<|im_end|>\n<|im_start|>assistant\n{AGENT_T1}<|im_end|>\n"
            f"<|im_start|>user\n{reply}")


def pairs() -> list[tuple[str, str]]:
    p = next(i.payload for i in data.load("sample") if i.payload["problem_id"] == PROBLEM)
    o = options()
    agent1 = user_prompt("agentic", p, o)
    return [
        (user_prompt("zero-shot", p, o), ZERO_SHOT),
        (user_prompt("oracle", p, o), ORACLE),
        (agent1, AGENT_T1),
        (turn2(agent1), AGENT_T2),
        (user_prompt("randsearch", p, o), RANDSEARCH),
        (user_prompt("randsearch-oracle", p, o), GENERATOR),
    ]
