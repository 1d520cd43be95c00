"""Loading DafnyComp: the shipped sample, a Chain_300-style folder (the shared 125 programs),
bad folders named in the error, and the pinned upstream fetch (served locally, checked by
sha256, the unpinned programs reported); plus the prompt and answer extraction."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.archive_server import ArchiveServer
from veribatch.tasks.base import DatasetError, UnknownNameError, get_task
from veribatch.tasks.dafnycomp import data, upstream
from veribatch.tasks.dafnycomp.answer import extract_program
from veribatch.tasks.dafnycomp.prompt import template_hash, user_prompt
from veribatch.tasks.dafnycomp.strip import strip
from veribatch.tasks.dafnycomp.syntax import declarations


def test_sample_and_shared_folder(shared_data: Path) -> None:
    task = get_task("dafnycomp")
    sample = task.load("sample")
    assert len(sample) == 6 and all(i.id.startswith("dafnycomp/sample/main_") for i in sample)
    assert sorted({i.meta["chain_length"] for i in sample}) == [2, 3, 4]
    shared = task.load(str(shared_data / "dafnycomp"))
    assert len(shared) == 125 and shared[0].id == "dafnycomp/chain300/main_2node_1-1925-279"
    assert {i.meta["chain_length"] for i in shared} == {2, 3}
    assert task.load(f"chain300:{shared_data / 'dafnycomp'}", limit=3) == shared[:3]
    assert task.dataset_hash(str(shared_data / "dafnycomp")) != task.dataset_hash("sample")
    with pytest.raises(UnknownNameError, match="known datasets: chain300, sample"):
        task.load("chain500")


def test_bad_folders_are_named(tmp_path: Path) -> None:
    (tmp_path / "main_2node_x").mkdir()
    (tmp_path / "main_2node_x" / "input_python_code.py").write_text("pass\n")
    with pytest.raises(DatasetError, match="main_2node_x: no dafny_code.dfy"):
        data.load_folder(tmp_path)
    with pytest.raises(DatasetError, match="not a DafnyComp program folder"):
        data.chain_folder(tmp_path)
    (tmp_path / "main_2node_x" / "dafny_code.dfy").write_text("  \n")
    with pytest.raises(DatasetError, match="dafny_code.dfy: empty program"):
        data.load_folder(tmp_path)


def _repo(shared_data: Path, dst: Path, extra: int) -> Path:
    """ReForm's layout with the 125 pinned programs and `extra` unpinned ones (written here)."""
    pins = upstream.ORIGIN.pins()
    repo = dst / f"ReForm-{pins['revision']}"
    chain = repo / pins["folder"]
    shutil.copytree(shared_data / "dafnycomp", chain)
    for k in range(extra):
        d = chain / f"main_4node_{k}-1-2-3-4"
        d.mkdir()
        (d / "dafny_code.dfy").write_text(f"method main_4node() returns (r: int)\n  ensures r == {k}\n{{\n  r := {k};\n}}\n")
    (repo / "README.md").write_text("not extracted\n")
    return repo


@pytest.fixture
def served(archive_server: ArchiveServer, monkeypatch: pytest.MonkeyPatch) -> ArchiveServer:
    monkeypatch.setattr(upstream, "ARCHIVE_URL", archive_server.url)
    return archive_server


def test_fetch_verifies_reports_unpinned_and_caches(shared_data: Path, tmp_path: Path, served: ArchiveServer,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    served.publish(_repo(shared_data, tmp_path / "src", extra=175), upstream.ORIGIN.pins()["revision"])
    chain = upstream.fetch()
    assert len(data.program_files(chain)) == 300
    assert {p.name for p in chain.iterdir() if not p.is_dir()} == {".verified"}  # only Chain_300 kept
    assert "175 of 300 programs have no pinned checksum" in caplog.text
    served.archive(upstream.ORIGIN.pins()["revision"]).unlink()
    assert upstream.fetch() == chain  # cached: no second download
    assert len(get_task("dafnycomp").load("chain300")) == 300


def test_a_changed_or_missing_program_is_rejected(shared_data: Path, tmp_path: Path, served: ArchiveServer) -> None:
    repo = _repo(shared_data, tmp_path / "src", extra=175)
    victim = sorted((repo / upstream.ORIGIN.pins()["folder"]).glob("*/dafny_code.dfy"))[7]
    victim.write_text(victim.read_text().replace("requires", "requires true &&", 1))
    served.publish(repo, upstream.ORIGIN.pins()["revision"])
    with pytest.raises(DatasetError, match=victim.parent.name):
        upstream.fetch()
    assert not upstream.ORIGIN.cache_dir().exists()
    served.publish(_repo(shared_data, tmp_path / "src2", extra=174), upstream.ORIGIN.pins()["revision"])
    with pytest.raises(DatasetError, match="299 programs, the pinned revision has 300"):
        upstream.fetch()


def test_offline_error_names_the_alternatives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(upstream, "ARCHIVE_URL", "http://127.0.0.1:9/{revision}.tar.gz")
    monkeypatch.setenv("VERIBATCH_CACHE", str(tmp_path / "cache"))
    with pytest.raises(DatasetError, match="VERIBATCH_DAFNYCOMP_ROOT"):
        upstream.fetch(timeout_s=5)


def test_prompt_and_extraction() -> None:
    program = (data.SAMPLE_DIR / "main_2node_inc_twice.dfy").read_text()
    prompt = user_prompt(strip(program))
    assert strip(program).strip() in prompt and "ensures y == x + 1" not in prompt
    assert "{:verify false}" in prompt and prompt.endswith("one ```dafny code block.")
    assert len(template_hash()) == 16
    two = extract_program("draft:\n```dafny\nmethod A() {}\n```\nfinal:\n```dafny\nmethod B() {}\n```\n")
    assert (two.outcome, two.code) == ("multiple_blocks", "method B() {}\n")
    assert extract_program("```dafny\nmethod A() {", finish_reason="length").outcome == "truncated"
    assert not extract_program("```dafny\nmethod A() {").usable
    assert extract_program("method A() {}").outcome == "bare"
    assert extract_program("").outcome == "empty"


def test_extraction_of_real_answer_shapes(shared_data: Path) -> None:
    program = (shared_data / "dafnycomp" / "main_2node_1-1925-279" / "dafny_code.dfy").read_text()
    names = [d.name for d in declarations(program)]
    # the final program, then a small usage example: the program, not the example
    usage = "```dafny\nmethod Main() {\n  var r := main_2node_1(5);\n}\n```"
    ex = extract_program(f"Here it is:\n```dafny\n{program}```\nUsage:\n{usage}\n", names=names)
    assert ex.outcome == "multiple_blocks" and ex.code == program
    # a <think> draft in a fence, then a bare final answer: the final answer
    draft = "```dafny\nmethod countTriples_1925(n: int) returns (result: int) {}\n```"
    ex = extract_program(f"<think>Let me draft.\n{draft}\n</think>\n{program}", names=names)
    assert ex.outcome == "bare" and ex.code.strip() == program.strip()
    # ```dfy fences
    ex = extract_program(f"```dfy\n{program}```", names=names)
    assert ex.outcome == "ok" and ex.code == program
    # text after the closing fence, the answer cut by the token limit in that text
    ex = extract_program(f"```dafny\n{program}```\nThis verifies since the invariant", "length", names)
    assert ex.outcome == "ok" and ex.usable
    # ... but a block that ends the cut answer is still truncated
    assert extract_program(f"```dafny\n{program}```", "length", names).outcome == "truncated"
