"""Shared answer extraction: every shape of answer maps to a named outcome, never a guess."""

import time

from veribatch.tasks.extract import drop_reasoning, extract_code, extract_label

LABELS = ("GENUINE", "SPURIOUS")


def test_one_block_with_prose_around_it() -> None:
    ex = extract_code("Here is the program:\n```dafny\nmethod M() {}\n```\nIt verifies.")
    assert ex.outcome == "ok" and ex.code == "method M() {}\n" and ex.usable


def test_several_blocks_take_the_requested_language_then_the_pick_rule() -> None:
    text = "```python\nprint(1)\n```\n```cpp\nint a;\n```\n```cpp\nint main(){}\n```"
    last = extract_code(text, languages=("cpp",))
    assert last.outcome == "multiple_blocks" and last.code == "int main(){}\n"
    first = extract_code(text, languages=("cpp",), pick="first")
    assert first.code == "int a;\n"
    only_py = extract_code(text, languages=("python",))
    assert only_py.outcome == "ok" and only_py.code == "print(1)\n"


def test_unclosed_block_or_length_finish_is_truncated_and_unusable() -> None:
    ex = extract_code("```dafny\nmethod M() {\n  var x")
    assert ex.outcome == "truncated" and not ex.usable and ex.code.startswith("method M()")
    ex = extract_code("```dafny\nmethod M() {}\n```", finish_reason="length")
    assert ex.outcome == "truncated"


def test_no_fence_is_no_block_unless_bare_code_is_accepted() -> None:
    assert extract_code("method M() {}").outcome == "no_block"
    bare = extract_code("method M() {}", bare_ok=True)
    assert bare.outcome == "bare" and bare.code == "method M() {}"
    assert extract_code("   \n").outcome == "empty"
    assert extract_code("```\n\n```").outcome == "empty"


def test_longer_fence_contains_a_shorter_one() -> None:
    ex = extract_code("````markdown\n```\ninner\n```\n````")
    assert ex.outcome == "ok" and ex.code == "```\ninner\n```\n"


def test_label_from_a_verdict_line_wins_and_the_last_one_counts() -> None:
    text = "At first I thought GENUINE.\nAnswer: GENUINE\nWait, the loop bound...\nFinal answer: spurious"
    assert extract_label(text, LABELS).label == "SPURIOUS"
    assert extract_label("**GENUINE**", LABELS).label == "GENUINE"


def test_label_conflict_none_and_empty_are_named() -> None:
    assert extract_label("It could be GENUINE or SPURIOUS.", LABELS).outcome == "conflict"
    assert extract_label("I cannot tell.", LABELS).outcome == "none"
    assert extract_label("", LABELS).outcome == "empty"
    assert extract_label("The state is genuinely odd", LABELS).outcome == "none"


def test_text_after_a_closing_fence_is_not_truncation() -> None:
    text = "```dafny\nmethod M() {}\n```\nThis program verifies because the loop inv"
    ex = extract_code(text, finish_reason="length")
    assert ex.outcome == "ok" and ex.usable and ex.code == "method M() {}\n"


def test_reasoning_sections_are_dropped_when_asked() -> None:
    text = "<think>draft:\n```dafny\nmethod Draft() {}\n```\n</think>\nmethod Final() {}\n"
    assert extract_code(text, bare_ok=True).code == "method Draft() {}\n"  # default: unchanged
    ex = extract_code(text, bare_ok=True, reasoning=True)
    assert ex.outcome == "bare" and ex.code.strip() == "method Final() {}"
    assert extract_code("<think>still thinking ```dafny\nmethod", bare_ok=True, reasoning=True).outcome == "truncated"


def test_a_pick_function_chooses_among_the_candidates() -> None:
    text = "```cpp\nint big() { return 1; }\n```\n```cpp\nint x;\n```"
    ex = extract_code(text, languages=("cpp",), pick=lambda blocks: 0)
    assert ex.outcome == "multiple_blocks" and ex.code.startswith("int big()")


def test_pathological_answers_are_read_in_linear_time() -> None:
    """Each took seconds to minutes with the backtracking expressions (issue 37)."""
    cases = ["```" + "a" * 40_000 + "`", "```\nx\n```\n" * 8000, "<think>" * 20_000,
             "<thoughts>" * 20_000, "~~~ x" + " " * 40_000 + "y"]
    for text in cases:
        start = time.perf_counter()
        extract_code(text, reasoning=True, bare_ok=True)
        assert time.perf_counter() - start < 1.0, text[:20]
    for text in ("answer" + "-" * 40_000, "verdict" + " " * 40_000 + "x"):
        start = time.perf_counter()
        assert extract_label(text, ("GENUINE", "SPURIOUS")).outcome == "none"
        assert time.perf_counter() - start < 1.0


def test_reasoning_sections_dropped_as_a_lazy_match_would() -> None:
    assert drop_reasoning("a<think>b</think>c<THINK>d</think>e") == ("ace", False)
    assert drop_reasoning("a<think>b<think>c</think>d") == ("ad", False)
    assert drop_reasoning("a<think>b</think>c<think>d") == ("ac", True)
    assert drop_reasoning("İ<think>b</think>c") == ("İc", False)
