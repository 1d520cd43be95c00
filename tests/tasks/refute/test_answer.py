"""Model answers → programs (named outcomes), prompts per strategy, the trivial generator."""

from __future__ import annotations

import pytest

from tests.support.refute_tiny import options
from veribatch.tasks.refute import STRATEGIES, answer, data
from veribatch.tasks.refute.fuzz import ExampleFuzzer, seed_for
from veribatch.tasks.refute.prompt import STRATEGY_FILES, template_version, user_prompt


def test_standard_answers_have_named_outcomes() -> None:
    ok = answer.program("The bug is x.\n```python\nprint(1)\n```")
    assert (ok.outcome, ok.lang, ok.code, ok.usable) == ("ok", "python", "print(1)\n", True)
    cpp = answer.program("```\n#include <cstdio>\nint main(){puts(\"1\");}\n```")
    assert (cpp.outcome, cpp.lang) == ("ok", "cpp")  # no fence language: sniffed
    two = answer.program("draft\n```python\nprint(1)\n```\nfinal\n```cpp\nint main(){}\n```")
    assert (two.outcome, two.lang) == ("multiple_blocks", "cpp")  # the last block wins
    cut = answer.program("```python\nprint(1", finish_reason="length")
    assert cut.outcome == "truncated" and not cut.usable
    assert answer.program("no code at all").outcome == "no_block"
    assert answer.program("").outcome == "empty"
    # an ```input block is never the program
    assert answer.program("```input\n3\n```").outcome == "no_block"


def test_randsearch_answers_split_into_brute_force_and_generator() -> None:
    labelled = answer.randsearch("Generator:\n```python\nprint(2)\n```\nBrute force:\n"
                                 "```cpp\nint main(){}\n```")
    brute, gen = labelled
    assert (brute.outcome, brute.lang, gen.outcome, gen.code) == ("ok", "cpp", "ok", "print(2)\n")
    brute, gen = answer.randsearch("```python\nb\n```\n```python\ng\n```")
    assert (brute.code, gen.code, brute.outcome) == ("b\n", "g\n", "by_order")
    brute, gen = answer.randsearch("Generator:\n```python\ng\n```")
    assert brute.outcome == "missing" and gen.usable
    brute, gen = answer.randsearch("Brute force:\n```python\nb\n```\nGenerator:\n```python\ng",
                                   finish_reason="length")
    assert brute.usable and gen.outcome == "truncated" and not gen.usable
    assert answer.randsearch(None)[0].outcome == "empty"


def test_agent_actions() -> None:
    run = answer.action("```python\nprint(input())\n```\n```input\n5\n```\nACTION: EXECUTE")
    assert (run.kind, run.code.code, run.stdin) == ("execute", "print(input())\n", "5\n")
    sub = answer.action("```cpp\nint main(){}\n```\n**ACTION: SUBMIT**")
    assert sub.kind == "submit" and sub.code.lang == "cpp"
    # the last action line decides; a reply with code but no action line is a submission
    assert answer.action("ACTION: EXECUTE\n```python\nx\n```\nACTION: SUBMIT").kind == "submit"
    assert answer.action("```python\nprint(1)\n```").kind == "submit"
    assert answer.action("I think the bug is in the loop.").kind == "none"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_prompts_carry_what_each_strategy_promises(strategy: str) -> None:
    p = next(i.payload for i in data.load("sample") if i.payload["problem_id"] == "S07")
    text = user_prompt(strategy, p, options(search_s=42.0, prompts="veribatch"))
    assert p["statement"] in text and p["wrong_code"] in text
    assert p["example_input"] in text and "1000 ms" in text
    has_correct = p["correct_python"] in text
    assert has_correct == (strategy in ("oracle", "randsearch-oracle"))
    assert ("Example 3" in text) == (strategy in ("few-shot", "agentic-few-shot"))
    assert ("ACTION: EXECUTE" in text) == (strategy in ("agentic", "agentic-few-shot"))
    assert ("42 seconds" in text) == (strategy.startswith("randsearch"))
    assert "$" not in text.replace("$$", "")  # every template field was filled
    # the template version is a hash of exactly the files the strategy uses
    version = template_version(strategy, {"prompts": "veribatch"})
    assert version.startswith("veribatch:") and len(version) == 22 and STRATEGY_FILES[strategy]


def test_blind_prompt_hides_the_wrong_code() -> None:
    p = data.load("sample")[0].payload
    text = user_prompt("blind", p, options())
    assert p["statement"] in text and p["wrong_code"] not in text


def test_the_trivial_generator_mutates_the_example_reproducibly() -> None:
    example = "4\n3 9 1 4\n"
    a, b = ExampleFuzzer(example, seed_for("x")), ExampleFuzzer(example, seed_for("x"))
    draws = [a.draw(i) for i in range(50)]
    assert draws == [b.draw(i) for i in range(50)]
    assert len(set(draws)) > 25
    assert all(d.count(b"\n") == 2 for d in draws)  # the example's lines stay
    assert draws != [ExampleFuzzer(example, seed_for("y")).draw(i) for i in range(50)]
    words = ExampleFuzzer("abca\n", 1)
    assert all(w.decode().strip().isalpha() for w in (words.draw(i) for i in range(20)))
