"""`hf:` — a transformers model on CPU or GPU, for small local models and the tiny smoke model.

Greedy requests with identical sampling are batched (left padding); sampled requests
run one at a time with ``torch.manual_seed(seed)`` so that a request's samples depend
only on its own seed, never on which other requests shared its batch — otherwise a
resumed shard would not reproduce what a fresh one produced.

Generation time is per request (`Completion.latency_s`): a step clock records when each
decoding step of a batch ends, and a request's time is the time from the batch's start
to the step that produced its last token — a short answer batched with a long one is not
charged the long one's time (InvBench §4 speedups include each instance's own generation
time).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from veribatch.inference.common import cut_at_stop, error_completions
from veribatch.inference.errors import EngineError, require_extra
from veribatch.inference.types import Completion, Engine, Request


def folder_revision(path: Path) -> str:
    """A cheap content identity of a local model folder (config + weight file heads and sizes)."""
    h = hashlib.sha256()
    for f in sorted(path.iterdir()):
        if f.is_file() and (f.suffix in {".json", ".safetensors", ".bin", ".jinja"}):
            h.update(f.name.encode())
            h.update(str(f.stat().st_size).encode())
            with f.open("rb") as fh:
                h.update(fh.read(1 << 20))
    return "local-" + h.hexdigest()[:12]


def _step_clock(torch: Any) -> Any:
    """A stopping criterion that never stops anything: it notes when each decoding step ends."""
    from transformers import StoppingCriteria

    class StepClock(StoppingCriteria):
        def __init__(self) -> None:
            self.stamps: list[float] = []

        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            self.stamps.append(time.perf_counter())
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

    return StepClock()


def finish_time(stamps: list[float], t0: float, n_tokens: int, batch_end: float) -> float:
    """Seconds from `t0` to the step that produced a sequence's `n_tokens`-th token."""
    if not stamps or n_tokens <= 0:
        return batch_end - t0
    return stamps[min(n_tokens, len(stamps)) - 1] - t0


class HFEngine(Engine):
    engine = "hf"
    poolable = True
    packages = ("torch", "transformers")

    def __init__(
        self,
        model: str,
        *,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 8,
        revision: str | None = None,
        threads: int | None = None,
    ) -> None:
        torch = require_extra("torch", "hf")
        transformers = require_extra("transformers", "hf")
        if threads:
            torch.set_num_threads(int(threads))
        self.model = model
        self.batch_size = max(1, int(batch_size))
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        torch_dtype: Any = "auto" if dtype == "auto" else getattr(torch, dtype)
        if dtype == "auto" and device == "cpu":
            torch_dtype = torch.float32
        local = Path(model).expanduser()
        source = str(local) if local.exists() else model
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(source, revision=revision)
            self.lm = transformers.AutoModelForCausalLM.from_pretrained(
                source, revision=revision, dtype=torch_dtype
            ).to(device)
        except (OSError, ValueError) as exc:
            raise EngineError(f"hf: cannot load model {model!r}: {exc}") from exc
        self.lm.eval()
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        if self.tokenizer.chat_template is None:
            raise EngineError(f"hf: model {model!r} has no chat template; chat requests need one")
        if local.is_dir():
            self.revision = revision or folder_revision(local)
        else:
            self.revision = revision or str(getattr(self.lm.config, "_commit_hash", "") or "")
        self._torch = torch

    # -- batching -----------------------------------------------------------------------
    def generate(self, requests: Sequence[Request]) -> list[list[Completion]]:
        results: list[list[Completion] | None] = [None] * len(requests)
        greedy: dict[Any, list[int]] = {}
        for i, r in enumerate(requests):
            if r.sampling.temperature <= 0 and r.sampling.n == 1:
                greedy.setdefault(r.sampling, []).append(i)
            else:
                results[i] = self._guarded([r])[0]
        for idxs in greedy.values():
            for start in range(0, len(idxs), self.batch_size):
                chunk = idxs[start : start + self.batch_size]
                for i, comps in zip(chunk, self._guarded([requests[i] for i in chunk]), strict=True):
                    results[i] = comps
        return [r for r in results if r is not None]

    def _guarded(self, batch: list[Request]) -> list[list[Completion]]:
        """Run one batch; on failure retry its requests one by one so only the bad one errs."""
        try:
            return self._run(batch)
        except Exception as exc:  # noqa: BLE001 (a failed request is recorded, not raised)
            if len(batch) > 1:
                return [self._guarded([r])[0] for r in batch]
            return [
                error_completions(
                    batch[0], engine=self.engine, model=self.model, revision=self.revision,
                    error=f"{type(exc).__name__}: {exc}",
                )
            ]

    def _run(self, batch: list[Request]) -> list[list[Completion]]:
        torch = self._torch
        s = batch[0].sampling
        prompts = [
            self.tokenizer.apply_chat_template(
                [{"role": m.role, "content": m.content} for m in r.messages],
                tokenize=False,
                add_generation_prompt=True,
            )
            for r in batch
        ]
        enc = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        enc = {k: v.to(self.device) for k, v in enc.items()}
        width = enc["input_ids"].shape[1]
        kwargs: dict[str, Any] = {
            "max_new_tokens": s.max_tokens,
            "pad_token_id": self.tokenizer.pad_token_id,
            "eos_token_id": self.lm.generation_config.eos_token_id or self.tokenizer.eos_token_id,
        }
        if s.temperature > 0:
            kwargs.update(do_sample=True, temperature=s.temperature, top_p=s.top_p,
                          num_return_sequences=s.n)
            torch.manual_seed(s.seed)
        else:
            kwargs.update(do_sample=False, num_return_sequences=s.n)
        if s.stop:
            kwargs.update(stop_strings=list(s.stop), tokenizer=self.tokenizer)
        from transformers import StoppingCriteriaList

        clock = _step_clock(torch)
        kwargs["stopping_criteria"] = StoppingCriteriaList([clock])
        t0 = time.perf_counter()
        with torch.no_grad():
            out = self.lm.generate(**enc, **kwargs)
        batch_end = time.perf_counter()

        eos = kwargs["eos_token_id"]
        eos_ids = set(eos if isinstance(eos, list) else [eos])
        pad = self.tokenizer.pad_token_id
        results: list[list[Completion]] = []
        for b, r in enumerate(batch):
            prompt_tokens = int(enc["attention_mask"][b].sum().item())
            comps = []
            longest = 0
            for k in range(s.n):
                gen = out[b * s.n + k, width:].tolist()
                n_tok, hit_eos = len(gen), False
                for j, t in enumerate(gen):
                    if t in eos_ids:
                        n_tok, hit_eos = j + 1, True
                        break
                if not hit_eos:  # trailing pad after a stop-string halt in a batch
                    while n_tok and gen[n_tok - 1] == pad and pad not in eos_ids:
                        n_tok -= 1
                text = self.tokenizer.decode(gen[:n_tok], skip_special_tokens=True)
                text, hit_stop = cut_at_stop(text, s.stop)
                finish = "stop" if (hit_eos or hit_stop) else "length"
                if not hit_eos and not hit_stop and n_tok < s.max_tokens:
                    finish = "stop"  # halted by a stop string that decoding normalised away
                longest = max(longest, n_tok)
                comps.append(
                    Completion(
                        request_id=r.id, index=k, text=text, finish_reason=finish,
                        prompt_tokens=prompt_tokens, completion_tokens=n_tok, latency_s=0.0,
                        engine=self.engine, model=self.model, model_revision=self.revision,
                        sampling=r.sampling.to_json(),
                    )
                )
            # the request is done when its last sample is: one time for all of its samples
            own = finish_time(clock.stamps, t0, longest, batch_end)
            for c in comps:
                c.latency_s = own
            results.append(comps)
        return results

    def close(self) -> None:
        self.lm = None
        if self.device.startswith("cuda"):
            self._torch.cuda.empty_cache()
