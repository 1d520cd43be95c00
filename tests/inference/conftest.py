"""Fixtures for inference tests: the tiny Qwen2 model, built once and shared.

Other test packages build their own (e.g. trained on InvBench-style pairs) with
`inference.tiny_model.cached_tiny_qwen2(pairs)`; it is cached by the pairs' hash.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from veribatch.inference.tiny_model import DEFAULT_PAIRS, MANIFEST, cached_tiny_qwen2
from veribatch.inference.types import Message, Request, Sampling


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    """A built tiny Qwen2 folder whose greedy answers are `DEFAULT_PAIRS`' answers."""
    path = cached_tiny_qwen2()
    info = json.loads((path / MANIFEST).read_text())
    assert info["all_pairs_learned"], f"tiny model under-trained: {info}"
    return path


@pytest.fixture(scope="session")
def tiny_pairs() -> list[tuple[str, str]]:
    return list(DEFAULT_PAIRS)


def chat(prompt: str, rid: str = "r", **sampling: object) -> Request:
    sampling.setdefault("max_tokens", 48)
    return Request(id=rid, messages=(Message("user", prompt),), sampling=Sampling(**sampling))  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def chat_request():
    """`chat_request(prompt, rid, **sampling)` → a one-message chat `Request`."""
    return chat


@pytest.fixture(scope="session")
def hf_engine(tiny_model: Path):
    from veribatch.inference.hf import HFEngine

    engine = HFEngine(str(tiny_model), batch_size=8)
    yield engine
    engine.close()
