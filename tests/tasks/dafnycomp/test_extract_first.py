"""`-o extract=first`: the first fenced Dafny block, as ReForm's scripts take it, beside the
default (the block declaring most of the original's declarations); default run ids kept."""

from __future__ import annotations

import pytest

from veribatch.launch.plan import make_config, run_id_for
from veribatch.tasks.base import Instance, get_task
from veribatch.tasks.dafnycomp.stages import check_candidates, extract_first

DRAFT = "method A(x: int) returns (y: int)\n{\n  y := x;\n}"
FINAL = DRAFT.replace("{", "  ensures y == x\n{") + "\nmethod B() {\n  var z := A(1);\n}"
ANSWER = f"A first try:\n```dafny\n{DRAFT}\n```\nThe whole program:\n```dafny\n{FINAL}\n```\n"


def test_first_block_is_the_draft_whole_program_the_final() -> None:
    ex = extract_first(ANSWER, "stop")
    assert ex.usable and ex.code.strip() == DRAFT
    inst = Instance(id="dafnycomp/t/p", task="dafnycomp", split="t",
                    payload={"program": FINAL.replace("  ensures y == x\n", ""), "name": "p"}, meta={})
    strip_rec = {"status": "ok", "stripped": inst.payload["program"], "declarations": 2}
    gen = [{"sample_index": 0, "status": "ok", "completion_text": ANSWER, "finish_reason": "stop"}]
    task = get_task("dafnycomp")
    first = make_config(task, model="openai:m", options=["extract=first", "verify=off"])
    whole = make_config(task, model="openai:m", options=["verify=off"])
    assert check_candidates(inst, first, strip_rec, gen)[0]["candidate"].strip() == DRAFT
    assert check_candidates(inst, whole, strip_rec, gen)[0]["candidate"].strip() == FINAL


def test_extract_option_changes_the_run_id_only_when_set() -> None:
    task = get_task("dafnycomp")
    default = make_config(task, model="openai:m")
    assert "extract" not in default.options
    assert run_id_for(make_config(task, model="openai:m", options=["extract=whole"])) == run_id_for(default)
    first = make_config(task, model="openai:m", options=["extract=first"])
    assert run_id_for(first) != run_id_for(default)
    assert task.versions(first)["extract"].endswith("+first-block")
    with pytest.raises(ValueError, match="extract='last': expected one of whole, first"):
        make_config(task, options=["extract=last"])
