"""Pulling code and labels out of a model's answer, shared by every task.

Each benchmark asks the model for something it then has to find in free text: a whole
program (DafnyComp), an input generator or brute force (REFUTE), a GENUINE/SPURIOUS label
(CE-Bench).  Models wrap it in fences, prose, several drafts, or run out of tokens half way.
This module never guesses: every way an answer can look is a *named outcome*, recorded by
the task, so a table can say how many answers were unusable and why.

Outcomes of `extract_code`:

- ``ok``: exactly one fenced block (in an accepted language), prose around it allowed;
- ``multiple_blocks``: several candidate blocks; the task's `pick` rule chose one
  (recorded, because "which draft did the model mean?" is a guess the table should show);
- ``truncated``: an opening fence without its closing fence, or ``finish_reason="length"``
  (the code is returned but must not be trusted as complete);
- ``no_block``: no fence at all; with ``bare_ok`` the whole text is taken as code
  (outcome ``bare``), otherwise nothing is extracted;
- ``empty``: the answer (or the only block) is blank.

Reasoning models wrap a draft in ``<think>...</think>`` and then answer; with
``reasoning=True`` (`drop_reasoning`) the closed reasoning sections are removed first (so a draft in a fence
never wins over a bare final answer), and an answer that is *only* an unclosed ``<think>``
is ``truncated``.  A closed block is complete whatever follows it: text after the closing
fence (prose, or an answer cut off by ``finish_reason="length"`` in that prose) does not
make the block truncated; only a block that is the very end of a length-cut answer is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

Outcome = Literal["ok", "multiple_blocks", "truncated", "no_block", "bare", "empty"]
OUTCOMES: tuple[Outcome, ...] = ("ok", "multiple_blocks", "truncated", "no_block", "bare", "empty")



def _fence(line: str) -> tuple[str, str] | None:
    """A fence line: ``` or ~~~ (3 or more), then an optional info string (no backtick)
    whose first word is the language; (fence, language), or None.  Scanned once, so linear
    in the line (a regular expression with two competing runs was quadratic on a long line)."""
    rest = line.lstrip(" \t")
    if rest[:3] not in ("```", "~~~"):
        return None
    ch = rest[0]
    n = len(rest) - len(rest.lstrip(ch))
    fence, info = rest[:n], rest[n:]
    if "`" in info:
        return None
    info = info.lstrip(" \t")
    end = 0
    while end < len(info) and not info[end].isspace() and info[end] != "`":
        end += 1
    return fence, info[:end]


@dataclass(frozen=True)
class CodeBlock:
    language: str        # the fence's info string, lower-cased ("" when none)
    text: str            # the lines between the fences
    closed: bool         # False: the answer ended inside this block
    start_line: int      # 1-based line of the opening fence in the answer
    trailing: bool = False  # non-blank text follows the closing fence


@dataclass(frozen=True)
class Extraction:
    outcome: Outcome
    code: str | None
    blocks: tuple[CodeBlock, ...] = field(default_factory=tuple)
    chosen: int | None = None          # index into `blocks` of the block returned

    @property
    def usable(self) -> bool:
        """Code that can be checked as the model's complete answer."""
        return self.outcome in ("ok", "multiple_blocks", "bare") and bool(self.code and self.code.strip())


def code_blocks(text: str) -> list[CodeBlock]:
    """Every fenced block in `text`, in order (CommonMark rules: a block closes at a fence of
    the same character at least as long; an unclosed block runs to the end)."""
    blocks: list[CodeBlock] = []
    lines = text.splitlines()
    last_text = max((k for k, ln in enumerate(lines) if ln.strip()), default=-1)
    i = 0
    while i < len(lines):
        m = _fence(lines[i])
        if m is None:
            i += 1
            continue
        fence, info = m[0], m[1].lower()
        body: list[str] = []
        j = i + 1
        closed = False
        while j < len(lines):
            close = _fence(lines[j])
            if close and close[0][0] == fence[0] and len(close[0]) >= len(fence) \
                    and not close[1]:
                closed = True
                break
            body.append(lines[j])
            j += 1
        trailing = closed and last_text > j
        blocks.append(CodeBlock(info, "\n".join(body) + ("\n" if body else ""), closed, i + 1, trailing))
        i = j + 1
    return blocks




def _without_closed_reasoning(text: str) -> str:
    """`text` without its ``<think>...</think>`` sections (each opening tag to the first
    closing tag after it, as a lazy match would), in one left-to-right pass."""
    low = text.lower()  # ASCII tags: lower() keeps every index of this text
    if len(low) != len(text):
        low = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    out: list[str] = []
    pos = 0
    while True:
        start = low.find("<think>", pos)
        if start < 0:
            break
        end = low.find("</think>", start + len("<think>"))
        if end < 0:
            break
        out.append(text[pos:start])
        pos = end + len("</think>")
    out.append(text[pos:])
    return "".join(out)


def drop_reasoning(text: str) -> tuple[str, bool]:
    """`text` without its closed ``<think>...</think>`` sections, and whether an unclosed
    ``<think>`` remains (then everything from it on is reasoning, not an answer).  A lone
    ``</think>`` (templates that put the opening tag in the prompt) ends the reasoning too."""
    out = _without_closed_reasoning(text)
    start = out.lower().find("<think>")
    if start >= 0:
        return out[:start], True
    low = out.lower()
    if "</think>" in low:
        out = out[low.rfind("</think>") + len("</think>"):]
    return out, False


Pick = Literal["last", "first", "longest"] | Callable[[Sequence[CodeBlock]], int]


def extract_code(text: str | None, *, languages: Sequence[str] = (),
                 pick: Pick = "last",
                 finish_reason: str | None = None, bare_ok: bool = False,
                 reasoning: bool = False) -> Extraction:
    """The program in a model's answer.  `languages` (lower-case info strings, e.g.
    ``("dafny", "dfy")``) filters the blocks when any block carries one of them; blocks with
    no language count as candidates too.  `pick` decides between several candidates: a
    rule name, or a function given the candidate blocks (in order) that returns the index of
    the one to take (a task that knows what a whole answer looks like).  `reasoning`: drop
    ``<think>`` sections first (`drop_reasoning`)."""
    if text is None or not text.strip():
        return Extraction("empty", None)
    if reasoning:
        text, unclosed = drop_reasoning(text)
        if not text.strip():
            return Extraction("truncated" if unclosed else "empty", None)
    blocks = tuple(code_blocks(text))
    wanted = {lang.lower() for lang in languages}
    candidates = [k for k, b in enumerate(blocks) if not wanted or b.language in wanted or not b.language]
    if wanted and any(blocks[k].language in wanted for k in candidates):
        candidates = [k for k in candidates if blocks[k].language in wanted]
    if not blocks or not candidates:
        if bare_ok and not blocks:
            outcome: Outcome = "truncated" if finish_reason == "length" else "bare"
            return Extraction(outcome, text, blocks)
        return Extraction("no_block", None, blocks)
    if callable(pick):
        chosen = candidates[pick([blocks[k] for k in candidates])]
    elif pick == "first":
        chosen = candidates[0]
    elif pick == "longest":
        chosen = max(candidates, key=lambda k: len(blocks[k].text))
    else:
        chosen = candidates[-1]
    block = blocks[chosen]
    if not block.closed or (finish_reason == "length" and chosen == len(blocks) - 1 and not block.trailing):
        return Extraction("truncated", block.text, blocks, chosen)
    if not block.text.strip():
        return Extraction("empty", None, blocks, chosen)
    return Extraction("ok" if len(candidates) == 1 else "multiple_blocks", block.text, blocks, chosen)


@dataclass(frozen=True)
class LabelAnswer:
    """A label read from an answer, or why none could be: ``ok``, ``none`` (no label word),
    ``conflict`` (the final answer names two different labels), ``empty``."""

    outcome: Literal["ok", "none", "conflict", "empty"]
    label: str | None


def extract_label(text: str | None, labels: Sequence[str]) -> LabelAnswer:
    """The label a model's answer settles on, among `labels` (e.g. GENUINE, SPURIOUS).

    An explicit verdict line (``answer: X``, ``final answer: X``, ``verdict: X``,
    ``label: X``, ``**X**`` on its own line) wins; the last such line counts, since
    reasoning models revise themselves.  Without one, the label words in the last non-empty
    line decide; a line naming two different labels is a conflict, never a guess.
    """
    if text is None or not text.strip():
        return LabelAnswer("empty", None)
    alternatives = "|".join(re.escape(lab) for lab in sorted(labels, key=len, reverse=True))
    word = re.compile(rf"(?<![A-Za-z_])({alternatives})(?![A-Za-z_])", re.IGNORECASE)
    # Applied to a line with its non-word ends trimmed (`_trim_nonword`), so no two
    # quantifiers compete for one run of punctuation: matching is linear in the line.
    keyed = re.compile(rf"(?:(?:final\s+)?answer|verdict|label|classification|result)\W*({alternatives})",
                       re.IGNORECASE)
    canon = {lab.lower(): lab for lab in labels}
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    for line in reversed(lines):
        core = _trim_nonword(line)
        if core.lower() in canon:  # **X**, X. on its own line
            return LabelAnswer("ok", canon[core.lower()])
        m = keyed.fullmatch(core)
        if m:
            return LabelAnswer("ok", canon[m.group(1).lower()])
    found = {canon[w.lower()] for w in word.findall(lines[-1])}
    if len(found) == 1:
        return LabelAnswer("ok", found.pop())
    if len(found) > 1:
        return LabelAnswer("conflict", None)
    return LabelAnswer("none", None)


def _word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _trim_nonword(line: str) -> str:
    """`line` without the non-word characters (``\\W``: punctuation, emphasis, spaces) at
    either end, by a scan from each end."""
    i, j = 0, len(line)
    while i < j and not _word_char(line[i]):
        i += 1
    while j > i and not _word_char(line[j - 1]):
        j -= 1
    return line[i:j]
