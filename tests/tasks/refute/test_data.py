"""Loading REFUTE problems: the sample in the hub's schema, local exports (parquet / JSONL),
bad rows named by file and row, and the hub download at a pinned revision with checksums —
served here by a real HTTP server speaking the hub's API, and refused when offline."""

from __future__ import annotations

import hashlib
import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from veribatch.launch.run_control import plan_run
from veribatch.tasks.base import DatasetError
from veribatch.tasks.refute import data, sample_build, upstream

REPO = "bethgelab/REFUTE"
SHA = "0123456789abcdef0123456789abcdef01234567"
PARQUET = "data/train-00000-of-00001.parquet"


def _rows() -> list[dict]:
    return [json.loads(line) for line in data.SAMPLE_FILE.read_text().splitlines()]


def test_the_sample_is_twelve_problems_in_the_hub_schema() -> None:
    rows = _rows()
    assert len(rows) == 12 and all(set(r) == set(data.HUB_COLUMNS) for r in rows)
    langs = {data.parse_lang(r["wrong_code_lang"]) for r in rows}
    assert langs == {"cpp", "python"}
    assert sample_build.main(["--check"]) == 0  # train.jsonl is built from problems/
    insts = data.load("sample")
    assert [i.id for i in insts] == [f"refute/sample/S{k:02d}" for k in range(1, 13)]
    s01 = insts[0]
    assert s01.payload["tags"] == ["greedy", "math", "sortings"]
    assert s01.payload["x_blind_generator"] and s01.payload["x_counterexample_generator"]
    assert s01.meta["wrong_lang"] == "cpp" and s01.meta["problem_rating"] == 1200


@pytest.mark.parametrize("lang, expected", [
    ("GNU C++17", "cpp"), ("C++20 (GCC 13-64)", "cpp"), ("Python 3", "python"), ("PyPy 3-64", "python"),
    ("PyPy 2", None), ("Python 2", None), ("Java 21", None), ("", None)])
def test_languages_as_the_harness_reads_them(lang: str, expected: str | None) -> None:
    assert data.parse_lang(lang) == expected


def _parquet(rows: list[dict], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_local_exports_load_like_the_hub(tmp_path: Path) -> None:
    rows = _rows()
    folder = tmp_path / "export"
    _parquet(rows, folder / PARQUET)
    insts = data.load(str(folder))
    assert [i.id for i in insts] == [f"refute/hub/S{k:02d}" for k in range(1, 13)]
    assert insts[0].payload["wrong_code"] == rows[0]["wrong_code"]
    assert "x_blind_generator" not in insts[0].payload  # only the sample has extras
    jsonl = tmp_path / "train.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows[:3]))
    assert len(data.load(str(jsonl))) == 3
    # a local export is a dataset spec the planner accepts, with hub limits
    plan = plan_run("refute", dataset=str(folder), limit=2)
    assert plan.config.options["search_s"] == 120.0 and plan.config.options["run_s"] == 20.0
    assert len(plan.instances) == 2 and plan.config.dataset_hash == data.dataset_hash(str(folder))


@pytest.mark.parametrize("change, message", [
    ({"validator": None}, "row 1 (problem_id='S02'): missing validator"),
    ({"wrong_code_lang": "Kotlin 1.9"}, "row 1 (problem S02): wrong_code_lang 'Kotlin 1.9'"),
    ({"correct_cpp": None, "correct_python": None}, "row 1 (problem S02): no correct solution"),
    ({"problem_id": "S01"}, "row 1: duplicate problem_id 'S01'"),
])
def test_bad_rows_are_named(tmp_path: Path, change: dict, message: str) -> None:
    rows = _rows()[:3]
    rows[1].update(change)
    f = tmp_path / "bad.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DatasetError) as e:
        data.load(str(f))
    assert str(f) in str(e.value) and message in str(e.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="no train-split parquet or JSONL"):
        data.load(str(tmp_path / "empty"))


class _Hub(http.server.BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}

    def do_GET(self) -> None:  # noqa: N802
        if self.path == f"/api/datasets/{REPO}/revision/main":
            body = json.dumps({"sha": SHA, "siblings": [{"rfilename": ".gitattributes"},
                                                        {"rfilename": "README.md"},
                                                        {"rfilename": PARQUET}]}).encode()
        elif self.path.startswith(f"/datasets/{REPO}/resolve/{SHA}/"):
            body = self.files.get(self.path.split(f"/resolve/{SHA}/", 1)[1], b"")
            if not body:
                self.send_error(404)
                return
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Hub]]:
    parquet = _parquet(_rows(), tmp_path / "served" / PARQUET).read_bytes()
    _Hub.files = {PARQUET: parquet}
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    pin = tmp_path / "pin.json"
    shutil.copy(upstream.PIN_FILE, pin)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{srv.server_address[1]}")
    monkeypatch.setenv(upstream.PIN_ENV, str(pin))
    monkeypatch.setenv("VERIBATCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(data.EXPORT_ENV, raising=False)
    yield _Hub
    srv.shutdown()


def test_the_shipped_pin_refuses_rather_than_downloading_main(hub: type[_Hub]) -> None:
    assert json.loads(upstream.PIN_FILE.read_text())["revision"] is None
    with pytest.raises(DatasetError, match="not pinned to a revision.*launch refute pin-hub"):
        data.load("hub")


def test_pin_then_fetch_checks_every_checksum(hub: type[_Hub], tmp_path: Path) -> None:
    pinned = upstream.pin("main")
    want = hashlib.sha256(hub.files[PARQUET]).hexdigest()
    assert pinned["revision"] == SHA and pinned["files"] == {PARQUET: want}
    insts = data.load("hub")
    assert len(insts) == 12 and insts[0].id == "refute/hub/S01"
    assert (tmp_path / "cache" / "refute" / SHA / ".verified").is_file()
    # the hub now serves different bytes at the pinned commit: a fresh fetch must refuse them
    shutil.rmtree(tmp_path / "cache")
    hub.files = {PARQUET: hub.files[PARQUET] + b"tampered"}
    with pytest.raises(DatasetError, match=f"sha256 .* does not match the pinned {want}"):
        data.load("hub")


def test_offline_says_so_and_points_at_the_alternatives(hub: type[_Hub], monkeypatch) -> None:
    upstream.pin("main")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on port 9
    with pytest.raises(DatasetError, match="cannot reach the Hugging Face hub.*Offline.*sample.*export"):
        data.load("hub")
