"""SLURM profiles: shipped ones load; unknown keys and missing partitions fail clearly."""

from __future__ import annotations

from pathlib import Path

import pytest

from veribatch.launch.profiles import ProfileError, apply_overrides, load_profile, parse_time

PROFILES = Path(__file__).resolve().parents[2] / "veribatch" / "slurm_profiles"


def test_shipped_profiles_load():
    local = load_profile("local-test")
    assert local.partitions["cpu"].partition == "cpu"
    assert local.partitions["gpu"].partition == "gpu"
    ex = load_profile(str(PROFILES / "example-cluster.yaml"))
    assert ex.partitions["gpu"].gres == "gpu:4" and ex.account == "proj-verif-123"
    assert ex.partitions["gpu"].time_min == 24 * 60 and ex.setup


def test_unknown_key_names_key_and_file(tmp_path):
    p = tmp_path / "typo.yaml"
    p.write_text("acount: x\npartitions:\n  cpu: {partition: cpu}\n")
    with pytest.raises(ProfileError, match=r"typo\.yaml.*unknown key\(s\) 'acount'"):
        load_profile(str(p))
    p.write_text("partitions:\n  cpu: {partition: cpu, memory: 3}\n")
    with pytest.raises(ProfileError, match=r"partitions\.cpu.*'memory'"):
        load_profile(str(p))


def test_missing_partition_for_a_stage_resource(tmp_path):
    p = tmp_path / "cpuonly.yaml"
    p.write_text("partitions:\n  cpu: {partition: cpu}\n")
    prof = load_profile(str(p))
    with pytest.raises(ProfileError, match="no partition for resource 'gpu', needed by stage 'generate'"):
        prof.for_resource("gpu", "generate")


def test_unknown_profile_lists_where_it_looked():
    with pytest.raises(ProfileError, match="unknown profile 'nowhere'.*nowhere.yaml"):
        load_profile("nowhere")


def test_cli_overrides_win():
    prof = apply_overrides(load_profile("local-test"), partitions=["gpu=big"], account="acct")
    assert prof.partitions["gpu"].partition == "big"
    assert prof.partitions["cpu"].partition == "cpu"
    assert prof.account == "acct"
    # a bare name that is neither a resource nor a profile partition: the GPU stages only
    gpu = apply_overrides(load_profile("local-test"), partitions=["debug"], resources=["cpu", "gpu"])
    assert (gpu.partitions["gpu"].partition, gpu.partitions["cpu"].partition) == ("debug", "cpu")
    cpu = apply_overrides(load_profile("local-test"), partitions=["debug"], resources=["cpu"])
    assert (cpu.partitions["gpu"].partition, cpu.partitions["cpu"].partition) == ("gpu", "debug")


@pytest.mark.parametrize("value,minutes", [(90, 90), ("90", 90), ("01:30:00", 90),
                                           ("2-00:00:00", 2880), ("30:00", 30), ("1-2", 1560)])
def test_parse_time(value, minutes):
    assert parse_time(value, "t") == minutes
