"""A real Qwen2-architecture model, small enough to build and train in seconds on a CPU.

No weights can be downloaded on a build machine or a fresh laptop, yet pipeline tests
need a model that really runs through transformers, Ray actors, vLLM and an HTTP
server.  This module builds one from nothing: a byte-level BPE tokenizer trained on
a little C text, a `Qwen2Config` with two layers (head_dim 64, which vLLM's CPU
backend accepts), a ChatML chat template, and a few seconds of training on canned
(prompt → answer) pairs so that its *greedy* answer to each trained prompt is exactly
the trained answer — deterministic and parseable, which is what a smoke test needs.

It is a smoke model, not a language model: prompts it was not trained on get junk.

    python -m veribatch.inference.tiny_model OUT_DIR [--pairs pairs.json]

`pairs.json` is a JSON list of ``[prompt, answer]``.  Tests use `cached_tiny_qwen2`,
which builds a model once per distinct (pairs, seed, builder source) and reuses it.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from veribatch.inference.errors import require_extra

# A little C, written for this module, to give the tokenizer sensible merges.
_C_CORPUS = r"""
#include <assert.h>
extern void abort(void);
extern void __assert_fail(const char *, const char *, unsigned int, const char *);
void reach_error() { __assert_fail("0", "loop.c", 3, "reach_error"); }
extern int __VERIFIER_nondet_int(void);
void __VERIFIER_assert(int cond) { if (!(cond)) { ERROR: { reach_error(); abort(); } } }
int main() {
  int x = 0, y = 0;
  int n = __VERIFIER_nondet_int();
  if (n < 0) return 0;
  while (x < n) {
    INVARIANT_MARKER_1();
    x = x + 1;
    y = y + 2;
  }
  __VERIFIER_assert(y == 2 * x);
  for (int i = 0; i < n; i++) { unsigned int k = i % 4; long s = s + k; }
  return 0;
}
"""

DEFAULT_PAIRS: tuple[tuple[str, str], ...] = (
    (
        "int x = 0; while (x < n) { x = x + 1; } assert(x == n);",
        "```\nINVARIANT_MARKER_1: x <= n\n```",
    ),
    (
        "int y = 0; while (y < 10) { y = y + 2; } assert(y == 10);",
        "```\nINVARIANT_MARKER_1: y % 2 == 0 && y <= 10\n```",
    ),
    ("Is this counterexample GENUINE or SPURIOUS? x = 3", "SPURIOUS"),
    ("Say hello.", "hello"),
)

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
QWEN2_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
MANIFEST = "tiny_model.json"


Prompt = str | Sequence[Sequence[str]]  # a user message, or (role, content) messages


def _chat_prompt(prompt: Prompt) -> str:
    """The prompt as CHATML_TEMPLATE renders it: a string is one user message; a sequence of
    (role, content) pairs is a conversation (a system message first, as some prompts have)."""
    messages = [("user", prompt)] if isinstance(prompt, str) else [(str(r), str(c)) for r, c in prompt]
    return "".join(f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in messages) + "<|im_start|>assistant\n"


def _train_tokenizer(texts: Sequence[str], vocab_size: int) -> Any:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    # Qwen2's own pre-tokenization: transformers (and vLLM) re-create it when they load
    # a `qwen2` folder, so training with anything else would make the saved model see
    # different token ids than the ones it was trained on.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = CHATML_TEMPLATE
    fast.padding_side = "left"
    return fast


def _token_id(tokenizer: Any, token: str) -> int:
    tid = tokenizer.convert_tokens_to_ids(token)
    if not isinstance(tid, int):
        raise ValueError(f"tokenizer has no single id for {token!r}")
    return tid


def build_tiny_qwen2(
    out_dir: Path,
    pairs: Sequence[tuple[Prompt, str]] | None = None,
    seed: int = 0,
    *,
    hidden_size: int = 128,
    max_train_s: float = 30.0,
) -> Path:
    """Build, train and save a tiny Qwen2 chat model into `out_dir`; return `out_dir`.

    Trains until the greedy answer to every prompt equals its answer (checked every
    few steps) or `max_train_s` passes; `tiny_model.json` records whether all were
    learned, so a test can tell an under-trained model from a broken pipeline.
    """
    require_extra("torch", "hf")
    require_extra("transformers", "hf")
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    pairs = [(p, str(a)) for p, a in (pairs if pairs is not None else DEFAULT_PAIRS)]
    if not pairs:
        raise ValueError("build_tiny_qwen2 needs at least one (prompt, answer) pair")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    torch.manual_seed(seed)

    texts = [_C_CORPUS] + [_chat_prompt(p) + a + "<|im_end|>\n" for p, a in pairs]
    # Save, then reload the way every engine will, and train on what the engines will see.
    _train_tokenizer(texts, vocab_size=1024).save_pretrained(out_dir)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(out_dir)
    vocab = len(tokenizer)
    eos_id, pad = _token_id(tokenizer, "<|im_end|>"), _token_id(tokenizer, "<|endoftext|>")
    # head_dim is a real Qwen2Config argument; the type stubs lag behind it.
    config = Qwen2Config(  # type: ignore[call-arg]
        vocab_size=vocab,
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=2,
        num_attention_heads=hidden_size // 64,
        num_key_value_heads=hidden_size // 64,
        head_dim=64,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad,
    )
    model = Qwen2ForCausalLM(config)

    # One example per pair: loss only on the answer (and the closing <|im_end|>).
    examples: list[tuple[list[int], list[int]]] = []
    for prompt, answer in pairs:
        p_ids = tokenizer(_chat_prompt(prompt), add_special_tokens=False)["input_ids"]
        a_ids = tokenizer(answer + "<|im_end|>", add_special_tokens=False)["input_ids"]
        examples.append((p_ids, a_ids))
    width = max(len(p) + len(a) for p, a in examples)
    ids = torch.full((len(examples), width), pad, dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for row, (p, a) in enumerate(examples):
        seq = p + a
        ids[row, : len(seq)] = torch.tensor(seq)
        labels[row, len(p) : len(seq)] = torch.tensor(a)
        mask[row, : len(seq)] = 1

    def all_learned() -> bool:
        model.eval()
        with torch.no_grad():
            for p, a in examples:
                out = model.generate(
                    torch.tensor([p]),
                    attention_mask=torch.ones((1, len(p)), dtype=torch.long),
                    max_new_tokens=len(a),
                    do_sample=False,
                    pad_token_id=pad,
                )
                if out[0, len(p) :].tolist() != a:
                    model.train()
                    return False
        model.train()
        return True

    optim = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    model.train()
    steps, learned = 0, False
    while True:
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optim.step()
        optim.zero_grad()
        steps += 1
        if steps % 20 == 0 and loss.item() < 0.05 and all_learned():
            learned = True
            break
        if time.perf_counter() - started > max_train_s:
            learned = all_learned()
            break

    model.eval()
    model.generation_config = GenerationConfig(
        eos_token_id=config.eos_token_id, pad_token_id=pad, do_sample=False
    )
    model.save_pretrained(out_dir, safe_serialization=True)
    (out_dir / MANIFEST).write_text(
        json.dumps(
            {
                "builder": "veribatch.inference.tiny_model.build_tiny_qwen2",
                "pairs": pairs,
                "seed": seed,
                "steps": steps,
                "final_loss": round(float(loss.item()), 6),
                "all_pairs_learned": learned,
                "build_s": round(time.perf_counter() - started, 3),
            },
            indent=1,
        )
    )
    return out_dir


def pairs_hash(pairs: Sequence[tuple[Prompt, str]] | None, seed: int = 0) -> str:
    """Identity of a built model: the pairs, the seed and this module's source text."""
    src = Path(__file__).read_bytes()
    blob = json.dumps(
        {"pairs": [list(p) for p in (pairs if pairs is not None else DEFAULT_PAIRS)], "seed": seed},
        sort_keys=True,
    ).encode()
    return hashlib.sha256(blob + src).hexdigest()[:16]


def _learned(folder: Path) -> bool:
    """A complete cached model whose manifest says it answers every trained prompt."""
    try:
        return bool(json.loads((folder / MANIFEST).read_text()).get("all_pairs_learned", True))
    except (OSError, ValueError):
        return False


def cached_tiny_qwen2(
    pairs: Sequence[tuple[Prompt, str]] | None = None, seed: int = 0, root: Path | None = None
) -> Path:
    """`build_tiny_qwen2` once per (pairs, seed, builder source), under `root`.

    `root` defaults to ``$VERIBATCH_TINY_MODEL_CACHE`` or ``<tmp>/veribatch-tiny-models``.
    Concurrent callers (pytest-xdist workers, parallel shards) serialize on a lock file;
    the model is built in a sibling directory and renamed into place, so a reader never
    sees a half-written model.  A cached model that did not learn its pairs (built on a
    machine too loaded to train it within the time budget) is built again, not reused: one
    slow morning must not leave every later run with a broken model.
    """
    root = Path(
        root
        or os.environ.get("VERIBATCH_TINY_MODEL_CACHE")
        or Path(tempfile.gettempdir()) / "veribatch-tiny-models"
    )
    root.mkdir(parents=True, exist_ok=True)
    final = root / pairs_hash(pairs, seed)
    if _learned(final):
        return final
    with open(root / f".{final.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _learned(final):
            return final
        work = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=root))
        try:
            build_tiny_qwen2(work, pairs, seed)
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(final)
            work.rename(final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return final


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m veribatch.inference.tiny_model",
        description="Build a GPU-free Qwen2 smoke model (tokenizer + weights + chat template).",
    )
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--pairs", type=Path, help="JSON list of [prompt, answer] to train on")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    pairs = None
    if args.pairs:
        try:
            raw = json.loads(args.pairs.read_text())
            pairs = [(str(p), str(a)) for p, a in raw]
        except (OSError, ValueError, TypeError) as exc:
            print(f"{args.pairs}: expected a JSON list of [prompt, answer] pairs ({exc})",
                  file=sys.stderr)
            return 2
    out = build_tiny_qwen2(args.out_dir, pairs, args.seed)
    info = json.loads((out / MANIFEST).read_text())
    print(f"{out}: {info['steps']} steps, loss {info['final_loss']}, "
          f"all pairs learned: {info['all_pairs_learned']}, {info['build_s']} s")
    return 0 if info["all_pairs_learned"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
