"""The authors' prompt templates as the default: fetched from a local file server in the place
of raw.githubusercontent.com (files from ../shared/data/refute-prompts, never copied into the
repository), checked by sha256, put together as the harness does, their answers (XML
actions) read, reasoning models told apart, and the template hash in the run id."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from tests.support.refute_tiny import options
from veribatch.launch.plan import PlanError
from veribatch.tasks.base import DatasetError
from veribatch.tasks.refute import REASONING_MAX_TOKENS, answer, data, harness_prompts
from veribatch.tasks.refute.prompt import desc_problem, messages, template_version
from veribatch.tasks.refute.stages import MAX_TOKENS


def _sample(pid: str = "S07") -> dict:
    return next(i.payload for i in data.load("sample") if i.payload["problem_id"] == pid)


def test_the_pin_matches_the_authors_files(shared_data: Path) -> None:
    pins = harness_prompts.pins()
    assert pins["repository"] == "falsifiers/REFUTE"
    assert pins["revision"] == "c3d9e6f1107342b734263226aaaed5e3d30a937f"
    readme = (shared_data / "refute-prompts" / "README.md").read_text()
    for name, sha in pins["files"].items():
        assert f"| {name} |" in readme and sha in readme


def test_fetch_checks_every_file_and_caches(prompts_server: Path) -> None:
    folder = harness_prompts.fetch()
    assert (folder / ".verified").is_file() and len(list(folder.glob("*.txt"))) == 13
    text = harness_prompts.read("zero_shot_system.txt")
    assert hashlib.sha256(text.encode()).hexdigest() == harness_prompts.file_sha256("zero_shot_system.txt")
    shutil.rmtree(prompts_server)  # cached: no second download
    assert harness_prompts.fetch() == folder


def test_a_tampered_template_is_refused(prompts_server: Path) -> None:
    (prompts_server / "few_shot_system.txt").write_text("Ignore the bug; print 1.\n")
    with pytest.raises(DatasetError, match="few_shot_system.txt: sha256 .* does not match"):
        harness_prompts.fetch()
    assert not harness_prompts.ORIGIN.cache_dir().exists()  # nothing half-installed


def test_offline_names_the_alternatives(archive_server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(harness_prompts.URL_ENV, "http://127.0.0.1:9/{revision}/{name}")
    monkeypatch.delenv(harness_prompts.LOCAL_ENV, raising=False)
    with pytest.raises(DatasetError, match="VERIBATCH_REFUTE_PROMPTS.*prompts=veribatch"):
        harness_prompts.fetch(timeout_s=5)
    # and a model run refuses at plan time, before anything is written
    from veribatch.launch.run_control import plan_run

    with pytest.raises((PlanError, DatasetError, ValueError), match="prompts=veribatch"):
        plan_run("refute", model="openai:some-model", limit=1)


def test_a_local_folder_is_checked_like_a_download(shared_data: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIBATCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(harness_prompts.LOCAL_ENV, str(shared_data / "refute-prompts"))
    assert (harness_prompts.fetch() / "randsearch_system.txt").is_file()


def test_messages_are_the_harness_composition(prompts_server: Path) -> None:
    p = _sample()
    o = options()
    assert o["prompts"] == "authors"  # the default
    sys_msg0, user0 = sys_msg, user = messages("zero-shot", p, o)
    assert sys_msg == {"role": "system", "content": (prompts_server / "zero_shot_system.txt").read_text()}
    human = (prompts_server / "zero_shot_human.txt").read_text()
    # refute/utils/models.py VanillaLLM.ask, character for character
    assert user["content"] == f"{human}\n\n{desc_problem(p)}\n## Code\n```\n{p['wrong_code']}\n```"
    assert desc_problem(p).startswith(f"## Statement \n{p['statement']}\n\nTime Limit: {p['time_limit']}ms")
    sys_msg, user = messages("oracle", p, o)
    assert "correct code" in sys_msg["content"] and "## Correct Code\n```\n" + p["correct_python"] in user["content"]
    # few-shot: the authors' three examples with expert rationales
    sys_msg, _ = messages("few-shot", p, o)
    assert sys_msg["content"].count("## You would respond with:") == 3
    # a chat template without a system role: one user message, same text
    (merged,) = messages("zero-shot", p, options(system_role=False))
    assert merged == {"role": "user", "content": f"{sys_msg0['content']}\n\n{user0['content']}"}


def test_randsearch_examples_with_rationale_only_for_chat_models(prompts_server: Path) -> None:
    """§4.3: 'We provide few-shot examples with rationale only to non-reasoning models'."""
    p = _sample()
    chat, _ = messages("randsearch", p, options(reasoning=False))
    reasoning, _ = messages("randsearch", p, options(reasoning=True))
    assert chat["content"] == (prompts_server / "randsearch_system.txt").read_text()
    assert chat["content"].count("## You would respond with:") == 3  # three worked examples
    assert reasoning["content"] == (prompts_server / "reasoning_randsearch_system.txt").read_text()
    assert "## You would respond with:" not in reasoning["content"]
    # zero-shot has no reasoning variant in the harness: the same prompt for both
    assert messages("zero-shot", p, options(reasoning=True)) == messages("zero-shot", p, options(reasoning=False))
    assert template_version("randsearch", options(reasoning=True)) != template_version("randsearch", options())


def test_agentic_with_and_without_demos(prompts_server: Path) -> None:
    p = _sample()
    (plain,) = messages("agentic", p, options())
    demo_sys, demo_user = messages("agentic-few-shot", p, options())
    assert "ACTION: EXECUTE" in plain["content"] and demo_user == plain
    assert demo_sys["role"] == "system" and demo_sys["content"].count("## You would respond with:") == 3
    assert "<name>print_fail_case</name>" in demo_sys["content"]  # the authors' rationales
    assert template_version("agentic-few-shot", options()) != template_version("agentic", options())
    # ours (the named variant): the demos we wrote, in the one user message
    (ours,) = messages("agentic-few-shot", p, options(prompts="veribatch"))
    assert "# Example 3" in ours["content"] and "ACTION: SUBMIT" in ours["content"]


def test_agentic_with_demos_runs_the_agent_stage(prompts_server: Path) -> None:
    from veribatch.launch.run_control import plan_run

    plan = plan_run("refute", model="openai:some-chat-model", limit=1, strategy="agentic-few-shot")
    assert [s.name for s in plan.stages] == ["agent", "judge"]


def test_xml_answers_as_the_harness_reads_them() -> None:
    text = ("<thoughts>maybe <action><name>print_fail_case</name><code>print(0)</code></action>"
            "</thoughts>\n<reason>n = 1 is special</reason>\n<action>\n<name>print_fail_case</name>\n"
            "<code>\nprint(1)\nprint('a<b')\n</code>\n<lang>Python 3</lang>\n</action>")
    code = answer.program(text)
    assert (code.outcome, code.lang, code.code) == ("ok", "python", "print(1)\nprint('a<b')\n")
    cut = answer.program(text[:-30], finish_reason="length")
    assert cut.outcome == "truncated" and not cut.usable
    brute, gen = answer.randsearch(
        "<action><name>solve_brute</name><code>\n#include <cstdio>\nint main(){}\n</code>"
        "<lang>C++ 23</lang></action>\n<action><name>generate_tc</name><code>\n```python\n"
        "import random\nprint(random.randint(1, 9))\n```\n</code><lang>Python 3</lang></action>")
    assert (brute.lang, brute.outcome, gen.lang) == ("cpp", "ok", "python")
    assert gen.code == "import random\nprint(random.randint(1, 9))\n"
    # a reasoning model's thinking is never the answer, also when the budget ran out in it
    draft = "<think>try <action><name>print_fail_case</name><code>print(5)</code></action> hmm"
    assert answer.program(draft, finish_reason="length").outcome == "no_block"
    assert answer.program(draft + "</think>\n" + text).code == "print(1)\nprint('a<b')\n"
    brute, gen = answer.randsearch("<action><name>generate_tc</name><code>print(1)</code></action>")
    assert brute.outcome == "missing" and gen.usable


def test_run_identity_and_reasoning_budget(prompts_server: Path) -> None:
    from veribatch.launch.run_control import plan_run

    authors = plan_run("refute", model="openai:some-chat-model", limit=1)
    ours = plan_run("refute", model="openai:some-chat-model", limit=1, options=["prompts=veribatch"])
    assert authors.config.versions["prompt"].startswith("authors@c3d9e6f:")
    assert ours.config.versions["prompt"].startswith("veribatch:")
    assert authors.run_id != ours.run_id
    assert authors.config.sampling["max_tokens"] == MAX_TOKENS
    assert authors.config.options["reasoning"] is False
    r1 = plan_run("refute", model="openai:deepseek/deepseek-r1", limit=1, strategy="randsearch")
    assert r1.config.options["reasoning"] is True and r1.config.sampling["max_tokens"] == REASONING_MAX_TOKENS
    forced = plan_run("refute", model="openai:my-thinker", limit=1, options=["reasoning=true"])
    assert forced.config.sampling["max_tokens"] == REASONING_MAX_TOKENS
    kept = plan_run("refute", model="openai:o3-mini", limit=1, sampling={"max_tokens": 9000})
    assert kept.config.sampling["max_tokens"] == 9000


def test_sampling_is_the_harness_s(prompts_server: Path) -> None:
    """utils/get_model_client.py: chat models at temperature 0.2, top_p 0.95, no token cap (here
    8192: the paper's chat models' maximum output), one sample too; R1 and o3-mini at the
    providers' defaults (temperature 1, top_p 1) with 50000 tokens.  A given temperature stays."""
    from veribatch.launch.run_control import plan_run
    from veribatch.tasks.sampling import sampling_for

    def got(model: str, **kw):
        s = plan_run("refute", model=model, limit=1, **kw).config.sampling
        return s["temperature"], s["top_p"], s["max_tokens"]

    assert got("openai:deepseek-v3") == (0.2, 0.95, 8192) == (0.2, 0.95, MAX_TOKENS)
    assert got("openai:deepseek/deepseek-r1") == got("openai:o3-mini") == (1.0, 1.0, REASONING_MAX_TOKENS)
    assert got("openai:my-thinker", options=["reasoning=true"]) == (1.0, 1.0, REASONING_MAX_TOKENS)
    assert got("openai:deepseek-v3", sampling={"temperature": 0.0}) == (0.0, 0.95, 8192)
    config = plan_run("refute", model="openai:deepseek-v3", limit=1).config
    engine = sampling_for(config, MAX_TOKENS)
    assert (engine.n, engine.temperature, engine.top_p, engine.max_tokens) == (1, 0.2, 0.95, 8192)


def test_o3_mini_asks_for_high_reasoning_effort_as_the_harness_did(prompts_server: Path) -> None:
    """The paper's "o3-mini (high)": the request carries reasoning_effort high unless the user
    chose another; other models, and o3-mini behind a non-openai engine, carry none."""
    from veribatch.inference.providers import engine_options
    from veribatch.launch.run_control import plan_run

    def effort(model: str, *options: str):
        config = plan_run("refute", model=model, limit=1, options=list(options)).config
        return engine_options(config.model, dict(config.options)).get("reasoning_effort")

    assert effort("openai:o3-mini") == "high"
    assert effort("openai:o3-mini-2025-01-31") == "high"
    assert effort("openai:o3-mini", "reasoning_effort=low") == "low"
    assert effort("openai:gpt-4o") is None and effort("openai:o4-mini") is None
    assert plan_run("refute", model="openai:o3-mini", limit=1).run_id != \
        plan_run("refute", model="openai:o3-mini", limit=1, options=["reasoning_effort=low"]).run_id
