"""The program in a model's answer, via the shared `tasks.extract.extract_code`.

Rules (recorded per candidate as the extraction outcome, see `tasks.extract`):

- ``<think>...</think>`` reasoning is dropped first, so a fenced draft inside it never wins
  over the final answer, fenced or bare (an answer that is only unclosed reasoning is
  ``truncated``);
- ```dafny and ```dfy blocks win over unlabelled ones;
- of several, the one that declares the most of the program's declarations wins, the
  *last* of those on a tie: the final whole program, not a small usage example after it
  nor a draft before it (ReForm's scripts take the first ```dafny block, which would
  score a draft);
- an answer without any fence is taken whole (outcome ``bare``), as the paper feeds
  outputs to Dafny directly;
- an unclosed fence, or a block that is the very end of a length-truncated answer, is
  ``truncated`` and not checked (half a program says nothing about the specifications);
  text after a closing fence does not make it truncated.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from veribatch.tasks.dafnycomp.syntax import DafnySyntaxError, declarations
from veribatch.tasks.extract import CodeBlock, Extraction, extract_code

EXTRACT_VERSION = "dafnycomp-extract-v2"
LANGUAGES = ("dafny", "dfy")


def _declared(block: CodeBlock, names: Collection[str]) -> int:
    try:
        return len({d.name for d in declarations(block.text)} & set(names))
    except DafnySyntaxError:
        return 0


def whole_program_pick(names: Collection[str]) -> Callable[[Sequence[CodeBlock]], int]:
    """Pick rule: the block declaring most of `names` (the original's declarations), last on a tie."""
    def pick(blocks: Sequence[CodeBlock]) -> int:
        scores = [_declared(b, names) for b in blocks]
        best = max(scores)
        return max(k for k, s in enumerate(scores) if s == best)
    return pick


def extract_program(text: str | None, finish_reason: str | None = None,
                    names: Collection[str] = ()) -> Extraction:
    """The candidate program; `names`: the declarations the original program has (without
    them, the last block is taken)."""
    return extract_code(text, languages=LANGUAGES, pick=whole_program_pick(names) if names else "last",
                        finish_reason=finish_reason, bare_ok=True, reasoning=True)
