"""The built dataset's file format (`tasks.cebench.dataset`, writer and reader in one module):
what a build writes is what an evaluation reads back, and a changed card is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from veribatch.tasks.base import DatasetError
from veribatch.tasks.cebench import counterexamples, dataset
from veribatch.tasks.cebench.card import (
    CATEGORIES,
    PAPER,
    PAPER_NAMES,
    card_markdown,
    make_card,
)


def _row(uid: str, label: str, evidence: str, status: str) -> dict:
    program, category, _ = uid.split("/")
    return {c: None for c in dataset.COLUMNS} | {
        "uid": uid, "program": program, "category": category, "site": "body_start",
        "state_json": '{"x": 1}', "label": label, "prompt_program": "int main() {}",
        "instrumented": "int main() {}", "extremal_usage": "none", "evidence": evidence,
        "verifier": "z3", "verifier_status": status}


ROWS = [_row("1.c/Inductive/000", "GENUINE", "replayed-trace", "FALSE"),
        _row("1.c/UNSAT_Pre/000", "SPURIOUS", "checked-proof:spacer", "TRUE"),
        _row("2.c/SAT_Pre/000", "UNKNOWN", "none", "FALSE")]


def test_the_cards_vocabulary_is_the_collections() -> None:
    assert set(dataset.LABELS) <= set(dataset.ALL_LABELS) and set(dataset.EVAL_COLUMNS) <= set(dataset.COLUMNS)
    assert set(CATEGORIES) == set(counterexamples.CATEGORIES) and PAPER_NAMES == counterexamples.PAPER_NAMES


def test_what_the_writer_writes_the_reader_reads(tmp_path: Path) -> None:
    programs = [{"program": "1.c", "status": "ok", "final_invariant": "x >= 0"},
                {"program": "2.c", "status": "ok", "final_invariant": "x >= 0"}]
    card = make_card(ROWS, programs, {"verifier": "z3", "budget_s": 100.0, "complete": True})
    dataset.write(tmp_path, ROWS, card, card_markdown(card))
    assert dataset.dataset_folder(tmp_path.parent / tmp_path.name) == tmp_path
    assert [r["uid"] for r in dataset.read_rows(tmp_path)] == [r["uid"] for r in ROWS]
    assert dataset.dataset_hash(tmp_path) == card["content_sha256"]
    assert card["version"] == dataset.version_of(card["content_sha256"])
    (tmp_path / dataset.CARD).write_text((tmp_path / dataset.CARD).read_text().replace(
        '"schema_version": 1', '"schema_version": 2'))
    with pytest.raises(DatasetError, match="schema_version 2"):
        dataset.read_card(tmp_path)


def test_the_card_says_what_the_labels_rest_on_from_the_rows() -> None:
    programs = [{"program": "1.c", "status": "ok"}, {"program": "2.c", "status": "ok"}]
    card = make_card(ROWS, programs, {"verifier": "z3", "budget_s": 100.0, "complete": True})
    assert card["evidence"] == {"by_label": {"GENUINE": {"replayed-trace": 1},
                                             "SPURIOUS": {"checked-proof:spacer": 1},
                                             "UNKNOWN": {"none": 1}},
                                "verdicts_not_trusted": 1}
    md = card_markdown(card).splitlines()
    assert "NOT the paper's Ultimate Automizer" in md[0]
    line = next(x for x in md if x.startswith("- labels rest on"))
    assert "gcc replayed into reach_error (replayed-trace 1)" in line
    assert "re-checked before it was trusted (checked-proof:spacer 1)" in line
    assert "1 verdict(s) came without a trace or proof that checked" in line
    assert card["differences"][0].startswith("Labels come from z3, not from the paper's Ultimate Automizer")
    # the paper's labeller, by name: no "NOT", no difference of labeller; its verdicts trusted
    ua = [dict(r, verifier="uautomizer", evidence="trusted-verdict:uautomizer" if r["label"] != "UNKNOWN"
               else "none", verifier_status="TRUE" if r["label"] == "SPURIOUS" else "FALSE"
               if r["label"] == "GENUINE" else "TIMEOUT") for r in ROWS]
    card = make_card(ua, programs, {"verifier": PAPER["labelling_verifier"], "budget_s": 100.0})
    md = card_markdown(card).splitlines()
    assert md[0].endswith("(the paper's verifier)") and "NOT" not in md[0]
    assert "the verifier's verdict alone, trusted as reported" in next(x for x in md if x.startswith("- labels rest on"))
    assert not any(d.startswith("Labels come from") for d in card["differences"])
