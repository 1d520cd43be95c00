"""The program in a model's answer, via the shared `tasks.extract.extract_code`.

Rules (recorded per candidate as the extraction outcome, see `tasks.extract`): ```dafny
blocks win over unlabelled ones; of several, the *last* is taken (reasoning models draft,
then answer; ReForm's scripts take the first ```dafny block, which would score a draft);
an answer without any fence is taken whole (outcome ``bare``), as the paper feeds outputs
to Dafny directly; an unclosed fence or a length-truncated answer is ``truncated`` and is
not checked, since half a program says nothing about the model's specifications.
"""

from __future__ import annotations

from veribatch.tasks.extract import Extraction, extract_code

EXTRACT_VERSION = "dafnycomp-extract-v1"


def extract_program(text: str | None, finish_reason: str | None = None) -> Extraction:
    return extract_code(text, languages=("dafny",), pick="last", finish_reason=finish_reason,
                        bare_ok=True)
