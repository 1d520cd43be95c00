"""`hf:` on the real tiny Qwen2 model: chat template, batching, seeds, n, stops, token counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from veribatch.inference import EngineError, open_engine
from veribatch.inference.hf import HFEngine


def test_greedy_batch_answers_trained_pairs_with_counts(hf_engine, tiny_pairs, chat_request) -> None:
    reqs = [chat_request(p, f"r{i}") for i, (p, _) in enumerate(tiny_pairs)]
    out = hf_engine.generate(reqs)
    assert [c[0].request_id for c in out] == [r.id for r in reqs]
    assert [c[0].text for c in out] == [a for _, a in tiny_pairs]
    tok = hf_engine.tokenizer
    for (prompt, answer), comps in zip(tiny_pairs, out, strict=True):
        c = comps[0]
        templ = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                        add_generation_prompt=True)
        assert c.prompt_tokens == len(tok(templ, add_special_tokens=False)["input_ids"])
        # the answer's tokens plus the end-of-turn token
        assert c.completion_tokens == len(tok(answer + "<|im_end|>", add_special_tokens=False)["input_ids"])
        assert c.finish_reason == "stop" and c.error is None
        assert c.latency_s > 0 and c.engine == "hf" and c.model_revision.startswith("local-")
        assert c.sampling["max_tokens"] == 48


def test_batched_equals_one_by_one(tiny_model: Path, hf_engine, tiny_pairs, chat_request) -> None:
    reqs = [chat_request(p, f"r{i}") for i, (p, _) in enumerate(tiny_pairs)] * 2
    single = HFEngine(str(tiny_model), batch_size=1)
    assert [c[0].text for c in single.generate(reqs)] == [c[0].text for c in hf_engine.generate(reqs)]


def test_seeded_samples_are_reproducible_and_seed_dependent(hf_engine, chat_request) -> None:
    def sample(seed: int) -> list[str]:
        out = hf_engine.generate([chat_request("Say hello.", "s", n=3, temperature=5.0,
                                               max_tokens=8, seed=seed)])[0]
        assert [c.index for c in out] == [0, 1, 2]
        return [c.text for c in out]

    assert sample(1) == sample(1)
    assert len({tuple(sample(s)) for s in range(4)}) > 1


def test_stop_string_cuts_text_and_max_tokens_gives_length(hf_engine, tiny_pairs, chat_request) -> None:
    prompt, answer = tiny_pairs[0]  # "```\nINVARIANT_MARKER_1: x <= n\n```"
    stopped = hf_engine.generate([chat_request(prompt, stop=("<=",))])[0][0]
    assert stopped.text == answer[: answer.index("<=")]
    assert stopped.finish_reason == "stop"
    short = hf_engine.generate([chat_request(prompt, max_tokens=3)])[0][0]
    assert short.finish_reason == "length" and short.completion_tokens == 3
    assert answer.startswith(short.text) and short.text != answer


def test_open_engine_hf_and_bad_model_folder(tiny_model: Path, tmp_path: Path, chat_request) -> None:
    with open_engine(f"hf:{tiny_model}") as e:
        assert e.engine == "hf" and e.generate([chat_request("Say hello.")])[0][0].text == "hello"
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(EngineError, match=str(tmp_path)):
        open_engine(f"hf:{tmp_path}")


def test_generation_time_is_each_requests_own(hf_engine, tiny_pairs, chat_request) -> None:
    """Batched together, a short answer is charged up to its own last token, not the batch's."""
    prompt, _ = tiny_pairs[0]
    short, long_ = hf_engine.generate([chat_request("Say hello.", "short"), chat_request(prompt, "long")])
    assert short[0].completion_tokens < long_[0].completion_tokens
    assert 0 < short[0].latency_s < long_[0].latency_s
    # a request's samples share one time: the request is done when its last sample is
    sampled = hf_engine.generate([chat_request("Say hello.", "s", n=3, temperature=5.0, max_tokens=8)])[0]
    assert len({c.latency_s for c in sampled}) == 1 and sampled[0].latency_s > 0
