"""`replay:RUN_DIR` answers from an earlier run's records, never from a model."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from veribatch.inference import EngineError, completion_to_record, open_engine
from veribatch.inference.cache import CachingEngine


def _write_run(run: Path, hf_engine, reqs) -> list:
    out = hf_engine.generate(reqs)
    rows = []
    for r, comps in zip(reqs, out, strict=True):
        for c in comps:
            # a task's generate record: its own columns plus the completion columns
            rows.append({"instance_id": f"inst/{r.id}", "stage": "generate", "shard": 0,
                         "candidate": "x <= n", **completion_to_record(hf_engine, r, c)})
    shard = run / "shards" / "generate" / "0"
    shard.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), shard / "records.parquet")
    (run / "shards" / "verify" / "0").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{"instance_id": "a", "verdict": "TRUE"}]),
                   run / "shards" / "verify" / "0" / "records.parquet")
    return out


def test_replay_returns_recorded_completions(tmp_path: Path, hf_engine, tiny_pairs, chat_request) -> None:
    reqs = [chat_request(p, f"r{i}", n=2, temperature=1.0, seed=i) for i, (p, _) in enumerate(tiny_pairs)]
    original = _write_run(tmp_path / "run", hf_engine, reqs)
    replay = open_engine(f"replay:{tmp_path / 'run'}")
    assert replay.engine == "replay"
    again = replay.generate([chat_request(p, f"new{i}", n=2, temperature=1.0, seed=i)
                             for i, (p, _) in enumerate(tiny_pairs)])
    for old, new in zip(original, again, strict=True):
        assert [c.text for c in new] == [c.text for c in old]
        # the engine that really generated it, and its generation time, are kept
        assert all(c.engine == "hf" and c.model == hf_engine.model for c in new)
        assert [c.latency_s for c in new] == [c.latency_s for c in old]
        assert [c.request_id for c in new] == [new[0].request_id] * 2
    # a request the earlier run never asked (other seed) is an error, not a guess
    missing = replay.generate([chat_request(tiny_pairs[0][0], "m", n=2, temperature=1.0, seed=99)])[0]
    assert all(c.finish_reason == "error" and "0 of 2" in (c.error or "") for c in missing)
    by_id = open_engine(f"replay:{tmp_path / 'run'}", match="id")
    assert by_id.generate([chat_request("anything", "r1", n=2)])[0][0].text == original[1][0].text


def test_replay_falls_back_to_completion_caches(tmp_path: Path, hf_engine, chat_request) -> None:
    CachingEngine(hf_engine, tmp_path / "run" / "shards" / "generate" / "0" / "scratch").generate(
        [chat_request("Say hello.", "h")])
    out = open_engine(f"replay:{tmp_path / 'run'}").generate([chat_request("Say hello.", "h2")])
    assert out[0][0].text == "hello" and out[0][0].request_id == "h2"


def test_replay_errors_name_the_place(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="does not exist"):
        open_engine(f"replay:{tmp_path / 'nope'}")
    (tmp_path / "empty").mkdir()
    with pytest.raises(EngineError, match="no completions found"):
        open_engine(f"replay:{tmp_path / 'empty'}")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "records.parquet").write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(EngineError, match="records.parquet"):
        open_engine(f"replay:{bad}")
