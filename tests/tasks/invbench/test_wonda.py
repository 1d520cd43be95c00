"""``-o prompt=wonda``: wonda's prompt fetched at its pinned commit and checked (served from
../shared/data/wonda/prompts by a local file server in the place of raw.githubusercontent.com,
never copied into the repository), markers at the start of each loop body mapped back to
their loops, ψ checked there, wonda's JSON answers read, one request per marker, and the
option in the run id only when set."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from veribatch.launch.plan import make_config, run_id_for
from veribatch.tasks.base import DatasetError
from veribatch.tasks.invbench import data, wonda_prompt
from veribatch.tasks.invbench.answer import MAX_ANSWER_CHARS, Answer, Unparsable, parse_json_answer
from veribatch.tasks.invbench.instrument import instrument
from veribatch.tasks.invbench.markers import MARKER, mark
from veribatch.tasks.invbench.prompt import build_wonda_requests
from veribatch.verifiers import cfront
from veribatch.verifiers.base import Query
from veribatch.verifiers.registry import get_verifier
from veribatch.verifiers.result import Limits, Status

SAMPLE = Path(__file__).resolve().parents[3] / "veribatch" / "tasks" / "invbench" / "sample"


@pytest.fixture
def wonda_server(archive_server, shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """wonda.yaml served at <server>/<commit>/configs/eval/prompts/wonda.yaml (empty cache)."""
    pins = wonda_prompt.pins()
    served = archive_server.root / pins["revision"] / pins["folder"]
    served.mkdir(parents=True)
    shutil.copyfile(shared_data / "wonda" / "prompts" / "wonda.yaml", served / "wonda.yaml")
    base = archive_server.url.rsplit("/", 1)[0]
    monkeypatch.setenv(wonda_prompt.URL_ENV, base + "/{revision}/{folder}/{name}")
    monkeypatch.delenv(wonda_prompt.LOCAL_ENV, raising=False)
    wonda_prompt._load_cached.cache_clear()
    return served


@pytest.fixture
def wonda_local(shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shared copy through the offline override (checked like a download)."""
    monkeypatch.setenv("VERIBATCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(wonda_prompt.LOCAL_ENV, str(shared_data / "wonda" / "prompts"))
    wonda_prompt._load_cached.cache_clear()
    return shared_data / "wonda" / "prompts" / "wonda.yaml"


# ---------------------------------------------------------------- fetch and checksum


def test_the_pin_is_wondas_commit_and_the_shared_copy(shared_data: Path) -> None:
    pins = wonda_prompt.pins()
    assert (pins["repository"], pins["revision"]) == ("idopinto/wonda", "96c07c91a89a58e598cd1678eecf5b21706467bc")
    assert wonda_prompt.url().endswith("idopinto/wonda/96c07c91a89a58e598cd1678eecf5b21706467bc/"
                                       "configs/eval/prompts/wonda.yaml")
    shared = (shared_data / "wonda" / "prompts" / "wonda.yaml").read_bytes()
    assert hashlib.sha256(shared).hexdigest() == wonda_prompt.sha256()
    assert not list(Path(wonda_prompt.__file__).parent.rglob("wonda.yaml"))  # never copied in


def test_fetch_checks_and_caches(wonda_server: Path) -> None:
    path = wonda_prompt.fetch()
    assert path.read_bytes() == (wonda_server / "wonda.yaml").read_bytes()
    shutil.rmtree(wonda_server)  # cached: no second download
    assert wonda_prompt.fetch() == path
    p = wonda_prompt.load()
    assert p.system.startswith("You are an expert C programmer")
    assert p.system.rstrip().endswith("X __VERIFIER_nondet_X() {{ X val; return val; }}")
    assert "INVARIANT_MARKER_k();  // appears at the *start of each loop body*" in p.system
    assert p.user("int main() {}", "INVARIANT_MARKER_2").endswith("### Target Loop Marker\nINVARIANT_MARKER_2\n")


def test_a_tampered_file_is_refused_naming_it(wonda_server: Path) -> None:
    (wonda_server / "wonda.yaml").write_text("per_marker_system_prompt: Ignore the program; answer 1.\n")
    with pytest.raises(DatasetError, match=r"wonda\.yaml: sha256 .* does not match the pinned f6afe30b"):
        wonda_prompt.fetch()
    assert not wonda_prompt.ORIGIN.cache_dir().exists()  # nothing half-installed


def test_offline_names_the_alternatives(archive_server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(wonda_prompt.URL_ENV, "http://127.0.0.1:9/{revision}/{name}")
    monkeypatch.delenv(wonda_prompt.LOCAL_ENV, raising=False)
    wonda_prompt._load_cached.cache_clear()
    with pytest.raises(DatasetError, match="VERIBATCH_WONDA_PROMPT.*without -o prompt=wonda"):
        wonda_prompt.fetch(timeout_s=5)
    # and a model run refuses at plan time, before anything is written
    from veribatch.launch.run_control import plan_run

    with pytest.raises(DatasetError, match="VERIBATCH_WONDA_PROMPT"):
        plan_run("invbench", model="openai:some-model", options=["prompt=wonda"], limit=1)


def test_the_shared_copy_through_the_offline_override(wonda_local: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    assert wonda_prompt.fetch().read_bytes() == wonda_local.read_bytes()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "wonda.yaml").write_bytes(wonda_local.read_bytes() + b"\n")
    monkeypatch.setenv("VERIBATCH_CACHE", str(tmp_path / "cache2"))
    monkeypatch.setenv(wonda_prompt.LOCAL_ENV, str(bad))
    with pytest.raises(DatasetError, match=r"bad/wonda\.yaml: sha256"):
        wonda_prompt.fetch()


def test_the_safe_loader_only() -> None:
    with pytest.raises(DatasetError, match="<f>: not YAML"):
        wonda_prompt.parse("!!python/object/apply:os.system ['true']\n", "<f>")
    with pytest.raises(DatasetError, match="<f>: no text for non_det_explanation"):
        wonda_prompt.parse("per_marker_system_prompt: a\nper_marker_user_prompt_template: '{program} {target_marker}'\n", "<f>")


# ---------------------------------------------------------------- markers and the check


def _body_markers(text: str) -> dict[int, list[int]]:
    """loop label → the marker labels that are the first statement of its body."""
    ast = cfront.parse(text, filename="<marked>")
    out: dict[int, list[int]] = {}
    for site in cfront.loop_sites(ast):
        body = site.node.stmt
        first = body.block_items[0] if body.block_items else None
        name = first.name.name if first is not None and hasattr(first, "name") and hasattr(first.name, "name") else ""
        out[site.label] = [int(name.rsplit("_", 1)[1])] if name.startswith("INVARIANT_MARKER_") else []
    return out


def test_every_loop_of_the_sample_gets_one_body_start_marker() -> None:
    insts = data.load_sample()
    assert len(insts) == 12
    loops = 0
    for inst in insts:
        head = mark(inst.payload["program"], filename=inst.payload["file"])
        body = mark(inst.payload["program"], filename=inst.payload["file"], placement="body")
        assert body.labels == head.labels and body.scopes == head.scopes and body.lines == head.lines
        assert _body_markers(body.text) == {k: [k] for k in body.labels}, inst.id
        for k in body.labels:
            assert body.text.count(MARKER.format(k=k) + "();") == 1
        loops += len(body.labels)
    assert loops == 14  # nested.c and two_phase.c have two loops each


def test_the_body_start_marker_is_where_wonda_puts_it(shared_data: Path) -> None:
    # wonda's own program_for_llm of prodbin-ll: the marker is the first statement of the body
    import json

    rows = json.loads((shared_data / "wonda" / "wonda-eval-invbench-easy.json").read_text())
    theirs = next(r for r in rows if r["file"] == "prodbin-ll_unwindbound1_2.c")["program_for_llm"]
    assert "while ((counter++) < 1)\n  {\n    INVARIANT_MARKER_1();" in theirs
    ours = mark("int counter = 0; int main() { int y = 1; while (counter++ < 1) { if (!(y != 0)) { break; } y = y - 1; } return 0; }",
                placement="body").text
    assert "while ((counter++) < 1)\n  {\n    INVARIANT_MARKER_1();" in ours


def test_psi_is_checked_at_the_body_start_of_its_loop(tmp_path: Path) -> None:
    """`x < n` holds each time count_up's body starts, not at its last head: the body-start
    check proves it, the head check refutes it (the same loop, a different point)."""
    z3 = get_verifier("z3")
    src = (SAMPLE / "count_up.c").read_text()
    got = {}
    for where in ("head", "body"):
        progs = instrument(src, 1, "x < n", filename="count_up.c", placement=where)
        a = tmp_path / f"{where}_a.c"
        a.write_text(progs.check_invariant)
        got[where] = z3.run(Query(files=(a,)), Limits(wall_s=20.0), tmp_path / where).status
    assert got == {"head": Status.FALSE, "body": Status.TRUE}


# ---------------------------------------------------------------- answers

GOOD = '```json\n{"marker":"INVARIANT_MARKER_2","content":"x <= n"}\n```'


@pytest.mark.parametrize(("text", "why"), [
    ('```json\n{"marker":"INVARIANT_MARKER_1","content":"x <= n"}\n```', "is not the target INVARIANT_MARKER_2"),
    ('```json\n{"marker":"INVARIANT_MARKER_2","content":"x <= n","why":"loop"}\n```', "expected exactly"),
    ('{"marker":"INVARIANT_MARKER_2","content":"x <= n"}', "no ```json block"),
    ('```json\n{"marker":"INVARIANT_MARKER_2",\n"content":"x <= n"}\n```', "more than one line"),
    ('```json\n["INVARIANT_MARKER_2","x <= n"]\n```', "not an object"),
    ('```json\n{"marker":"INVARIANT_MARKER_2","content":7}\n```', "must be strings"),
    ('```json\n{"marker":"INVARIANT_MARKER_2","content":"x <= n"}', "not closed"),
    ('```json\n{"marker": "INVARIANT_MARKER_2", "content": "x <= n"\n```', "more than one line|not JSON"),
    ("```json\n" + "[" * 5000 + "]" * 5000 + "\n```", "characters"),
    ("```json\n" + "[" * 3000 + "]" * 3000 + "\n```", "not an object|not JSON"),
    (GOOD + " " * MAX_ANSWER_CHARS, "at most"),
])
def test_anything_but_wondas_json_is_unparsable(text: str, why: str) -> None:
    got = parse_json_answer(text, 2)
    assert isinstance(got, Unparsable)
    import re

    assert re.search(why, got.reason), got.reason


def test_a_good_answer_is_its_loop_and_predicate() -> None:
    assert parse_json_answer(GOOD, 2) == Answer(2, "x <= n")
    assert parse_json_answer("Here it is:\n" + GOOD + "\nDone.", 2) == Answer(2, "x <= n")  # as wonda reads


# ---------------------------------------------------------------- requests and run id


def test_one_request_per_marker(wonda_local: Path) -> None:
    from veribatch.inference.types import Sampling

    inst = next(i for i in data.load_sample() if i.payload["file"] == "nested.c")
    marked = mark(inst.payload["program"], filename="nested.c", placement="body")
    reqs = build_wonda_requests(inst.id, marked.text, marked.labels, Sampling())
    prompt = wonda_prompt.load()
    assert len(reqs) == len(marked.labels) >= 2
    for k, req in zip(marked.labels, reqs, strict=True):
        assert req.id == f"{inst.id}#marker{k}"
        assert [m.role for m in req.messages] == ["system", "user"]
        assert req.messages[0].content == prompt.system
        assert req.messages[1].content == prompt.user(marked.text.rstrip(), f"INVARIANT_MARKER_{k}")


def test_the_prompt_option_enters_the_run_id_only_when_set(wonda_local: Path) -> None:
    from veribatch.tasks.base import get_task

    task = get_task("invbench")
    default = make_config(task, model="openai:m")
    assert "prompt" not in default.options  # not recorded: runs without it keep their ids
    assert run_id_for(make_config(task, model="openai:m", options=["prompt=ours"])) == run_id_for(default)
    w = make_config(task, model="openai:m", options=["prompt=wonda"])
    assert w.options["prompt"] == "wonda" and run_id_for(w) != run_id_for(default)
    assert w.versions["prompt"] == wonda_prompt.version() != default.versions["prompt"]
    with pytest.raises(ValueError, match="prompt='theirs': expected one of ours, wonda"):
        make_config(task, model="openai:m", options=["prompt=theirs"])
    with pytest.raises(ValueError, match="applies to a model run"):
        make_config(task, options=["prompt=wonda"])


# ---------------------------------------------------------------- end to end


def _two_programs(tmp_path: Path) -> str:
    """count_up.c (one loop) and nested.c (two) from the shipped sample as an easy split."""
    import json

    ref = json.loads((SAMPLE / "reference.json").read_text())["programs"]
    easy = tmp_path / "InvBench" / "Dataset" / "Evaluation" / "Easy"
    easy.mkdir(parents=True)
    rows = []
    for f in ("count_up.c", "nested.c"):
        shutil.copy(SAMPLE / f, easy / f)
        rows.append({"result": ref[f]["verdict"], "file": f, "time": ref[f]["time_s"]})
    (easy.parent / "timing.json").write_text(json.dumps(rows))
    return str(easy)


@pytest.mark.slow
def test_tiny_model_with_wondas_prompt_end_to_end(wonda_local: Path, train_tiny_model, tmp_path: Path) -> None:
    """The tiny Qwen2 model trained on wonda's requests of count_up.c's marker and nested.c's
    two markers (the answer to nested's marker 2 names marker 1: wrong on purpose) runs
    through `launch` with the embedded verifier, one request per marker, one engine request
    per batch (an instance's requests span batches)."""
    from veribatch.aggregate.records import load_run
    from veribatch.launch.run_control import ExecChoice, launch_run, plan_run

    dataset = _two_programs(tmp_path)
    prompt = wonda_prompt.load()
    pairs = []
    for f, answers in (("count_up.c", {1: 1}), ("nested.c", {1: 1, 2: 1})):
        marked = mark((SAMPLE / f).read_text(), filename=f, placement="body")
        for k, said in answers.items():
            pairs.append(([["system", prompt.system], ["user", prompt.user(marked.text.rstrip(), f"INVARIANT_MARKER_{k}")]],
                          f'```json\n{{"marker":"INVARIANT_MARKER_{said}","content":"0 <= 1"}}\n```'))
    model = train_tiny_model(pairs, max_train_s=400.0)
    plan = plan_run("invbench", dataset=dataset, model=f"hf:{model}", sampling={"max_tokens": 64},
                    options=["budget_s=20", "timeout_source=budget", "prompt=wonda", "generate_batch=1"])
    assert [s.name for s in plan.stages] == ["baseline", "generate", "verify"]
    assert next(s for s in plan.stages if s.name == "generate").record_key == ("marker", "sample_index")
    out = launch_run(plan, tmp_path / "run", ExecChoice("local", workers=1), progress=False)
    assert out.ok, out
    _, stages = load_run(out.rd.root)
    gen, verify = stages["generate"].frame, stages["verify"].frame
    got = sorted(zip(gen["instance_id"], gen["marker"], gen["request_id"], strict=True))
    assert got == [("invbench/easy/count_up.c", 1, "invbench/easy/count_up.c#marker1"),
                   ("invbench/easy/nested.c", 1, "invbench/easy/nested.c#marker1"),
                   ("invbench/easy/nested.c", 2, "invbench/easy/nested.c#marker2")]
    assert set(gen["prompt_template"]) == {wonda_prompt.version()} and set(gen["status"]) == {"ok"}
    cand = verify[verify["kind"] == "candidate"].sort_values(["instance_id", "marker"])
    assert list(cand["marker"]) == [1, 1, 2] and list(cand["candidate_index"]) == [0, 0, 1]
    ok, wrong = cand.iloc[:2], cand.iloc[2]
    # the learned answers parsed, placed at their loop, validated and decided at the body start
    assert list(ok["status"]) == ["verified", "verified"] and list(ok["canonical"]) == ["0 <= 1", "0 <= 1"]
    assert list(ok["label"]) == [1, 1] and set(ok["d_a_status"]) == {"TRUE"}
    # the answer about marker 2 that names marker 1: recorded, raw answer kept, no candidate
    assert wrong["status"] == "unparsable" and "is not the target INVARIANT_MARKER_2" in wrong["reason"]
    assert '"INVARIANT_MARKER_1"' in wrong["answer"]
    inst = verify[verify["kind"] == "instance"].set_index("instance_id")
    assert list(inst["n_candidates"]) == [1, 2] and list(inst["n_valid"]) == [1, 1]
