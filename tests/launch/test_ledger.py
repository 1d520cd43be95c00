"""The ledger keeps every complete line and cuts a torn last one, so nothing is lost or redone twice."""

from __future__ import annotations

import json

from veribatch.launch.ledger import LedgerWriter, read_ledger
from veribatch.tasks.base import InstanceResult


def write(path, *results):
    with LedgerWriter(path) as w:
        for r in results:
            w.append(r)


def test_roundtrip_and_first_line_wins(tmp_path):
    p = tmp_path / "ledger.jsonl"
    write(p, InstanceResult("a", [{"v": 1}]), InstanceResult("b", []),
          InstanceResult("a", [{"v": 2}]))
    got = read_ledger(p, ["a", "b", "c"])
    assert got.results == {"a": [{"v": 1}], "b": []}
    assert got.torn_bytes == 0 and got.bad_lines == []


def test_torn_last_line_is_cut_and_appends_continue_cleanly(tmp_path):
    p = tmp_path / "ledger.jsonl"
    write(p, InstanceResult("a", [{"v": 1}]))
    with open(p, "ab") as f:
        f.write(b'{"instance_id": "b", "records": [{"v"')  # writer killed mid-line
    got = read_ledger(p, ["a", "b"])
    assert set(got.results) == {"a"} and got.torn_bytes > 0
    write(p, InstanceResult("b", [{"v": 2}]))
    again = read_ledger(p, ["a", "b"])
    assert again.results == {"a": [{"v": 1}], "b": [{"v": 2}]}
    assert again.torn_bytes == 0
    assert all(json.loads(line) for line in p.read_text().splitlines())


def test_garbage_inside_and_foreign_ids_are_reported_not_used(tmp_path):
    p = tmp_path / "ledger.jsonl"
    write(p, InstanceResult("a", [{"v": 1}]))
    with open(p, "ab") as f:
        f.write(b"\x00\x00not json\n")
    write(p, InstanceResult("zzz", [{"v": 9}]), InstanceResult("b", [{"v": 2}]))
    got = read_ledger(p, ["a", "b"])
    assert got.results == {"a": [{"v": 1}], "b": [{"v": 2}]}
    assert got.bad_lines == [2] and got.foreign == ["zzz"]


def test_zero_filled_tail_after_crash_is_torn(tmp_path):
    p = tmp_path / "ledger.jsonl"
    write(p, InstanceResult("a", [{"v": 1}]))
    with open(p, "ab") as f:
        f.write(b"\x00" * 20 + b"\n")
    got = read_ledger(p, ["a"])
    assert got.results == {"a": [{"v": 1}]} and got.torn_bytes == 21
