"""Schedules and the machine table: shipped data loads and matches the paper; bad files are
rejected with the file and the dotted key named."""

from __future__ import annotations

import pytest

from composer.arch.machines import get_machine, load_machines
from composer.config.schedules import available_orders, load_schedule, load_schedule_file
from composer.errors import ComposerError, ConfigError
from composer.paths.registry import path_names

# Table S29: p -> (n, dt, nstep, warmup, timed stages); the grid is n x n x n.
TABLE_S29 = {
    7: (32, 1e-5, 20, 1, 57),
    15: (16, 1e-5, 20, 1, 57),
    31: (8, 1e-6, 200, 1, 597),
    63: (4, 1e-6, 20, 1, 57),
    127: (2, 1e-6, 100, 1, 297),
    255: (1, 1e-7, 20, 1, 57),
    511: (1, 1e-8, 20, 2, 54),
    575: (1, 1e-8, 50, 5, 135),
    767: (1, 1e-8, 15, 4, 33),
    1023: (1, 1e-8, 10, 3, 21),
}

GOOD = """\
order = 7
[benchmark]
grid = [32, 32, 32]
dt = 1e-5
nstep = 20
warmup_steps = 1
timed_stages = 57
graph = false
[validation]
grid = [32, 32, 32]
nstep = 1
tolerance = 1e-12
"""


def test_available_orders_are_the_paper_orders():
    assert available_orders() == sorted(TABLE_S29)


@pytest.mark.parametrize("order", sorted(TABLE_S29))
def test_shipped_schedule_matches_table_s29(order):
    s = load_schedule(order)
    n, dt, nstep, warmup, timed = TABLE_S29[order]
    b = s.benchmark
    assert s.order == order and s.nq == order + 1
    assert b.grid == (n, n, n)
    assert b.dt == pytest.approx(dt, rel=0, abs=0)
    assert (b.nstep, b.warmup_steps, b.timed_stages) == (nstep, warmup, timed)
    assert b.timed_stages == 3 * (b.nstep - b.warmup_steps)
    assert b.graph is False
    assert s.benchmark_points == (order + 1) ** 3 * n**3
    if order <= 255:  # fixed 256^3 volume degrees of freedom (Section 3.1)
        assert s.benchmark_points == 256**3
    else:
        assert b.num_elements == 1
    v = s.validation
    assert v.grid == b.grid and v.nstep == 1 and v.tolerance == 1e-12
    assert set(s.paths) <= set(path_names()), sorted(s.paths)  # every [paths.*] table names a path


def _write(tmp_path, text, name="p0007.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _reject(tmp_path, text, *fragments, name="p0007.toml"):
    with pytest.raises(ConfigError) as info:
        load_schedule_file(_write(tmp_path, text, name))
    message = str(info.value)
    assert name in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_good_file_and_path_tables_pass_through(tmp_path):
    text = GOOD + '[paths.GEMM]\n[paths.GEMM_CUTE]\nmma = "8x8x4"\nlibrary = { x = "cublas" }\n'
    s = load_schedule_file(_write(tmp_path, text))
    assert s.paths == {"GEMM": {}, "GEMM_CUTE": {"mma": "8x8x4", "library": {"x": "cublas"}}}


def test_path_tables_are_checked_at_load(tmp_path):
    """No longer free-form (tests/test_schedule_validation.py has every case)."""
    _reject(tmp_path, GOOD + '[paths.GEMM]\ntiles = [64, 64]\n', "paths.GEMM.tiles", "unknown key")
    _reject(tmp_path, GOOD + '[paths.FUSED_TC]\nmma = "m8n8k4"\n', "paths.FUSED_TC.flux")


def test_toml_syntax_error(tmp_path):
    _reject(tmp_path, GOOD.replace("dt = 1e-5", "dt = = 1e-5"), "TOML syntax error")


def test_missing_key(tmp_path):
    _reject(tmp_path, GOOD.replace("nstep = 20\n", ""), "benchmark.nstep", "missing")


def test_missing_table(tmp_path):
    _reject(tmp_path, GOOD.split("[validation]")[0], "validation", "missing")


def test_wrong_type(tmp_path):
    msg = _reject(tmp_path, GOOD.replace("dt = 1e-5", "dt = 'abc'"), "benchmark.dt")
    assert msg == f"{tmp_path / 'p0007.toml'}: benchmark.dt: expected a positive float, got 'abc'"


@pytest.mark.parametrize(
    "old, new, key",
    [
        ("grid = [32, 32, 32]\ndt", "grid = [32, 32]\ndt", "benchmark.grid"),
        ("graph = false", "graph = 0", "benchmark.graph"),
        ("nstep = 1\n", "nstep = 1.5\n", "validation.nstep"),
        ("tolerance = 1e-12", "tolerance = -1e-12", "validation.tolerance"),
        ("order = 7", "order = true", "order"),
    ],
)
def test_wrong_types(tmp_path, old, new, key):
    assert old in GOOD
    _reject(tmp_path, GOOD.replace(old, new, 1), key)


@pytest.mark.parametrize(
    "text, key",
    [
        ("colour = 'red'\n" + GOOD, "colour"),
        (GOOD.replace("graph = false", "graph = false\nspeed = 3"), "benchmark.speed"),
        (GOOD + "extra = 1\n", "validation.extra"),
        (GOOD + "[paths]\nGEMM = 3\n", "paths.GEMM"),
    ],
)
def test_unknown_keys(tmp_path, text, key):
    _reject(tmp_path, text, key)


def test_inconsistent_timed_stages(tmp_path):
    _reject(
        tmp_path,
        GOOD.replace("timed_stages = 57", "timed_stages = 60"),
        "benchmark.timed_stages",
        "57",
    )


def test_warmup_not_below_nstep(tmp_path):
    _reject(
        tmp_path, GOOD.replace("warmup_steps = 1", "warmup_steps = 20"), "benchmark.warmup_steps"
    )


def test_order_must_match_file_name(tmp_path):
    _reject(tmp_path, GOOD, "order", name="p0015.toml")


def test_unknown_order_lists_available():
    with pytest.raises(ConfigError) as info:
        load_schedule(8)
    assert "p0008.toml" in str(info.value) and "7, 15, 31" in str(info.value)


def test_override_directory(tmp_path, monkeypatch):
    _write(tmp_path, GOOD.replace("order = 7", "order = 3"), "p0003.toml")
    _write(
        tmp_path,
        GOOD.replace("nstep = 20", "nstep = 21").replace("timed_stages = 57", "timed_stages = 60"),
    )
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(tmp_path))
    assert available_orders()[:2] == [3, 7]
    assert load_schedule(7).benchmark.nstep == 21
    assert load_schedule(15).benchmark.grid == (16, 16, 16)
    _write(tmp_path, "order = ", "p0005.toml")
    with pytest.raises(ConfigError, match="p0005.toml: TOML syntax error"):
        load_schedule(5)


def test_config_error_is_a_composer_and_value_error():
    assert issubclass(ConfigError, ComposerError) and issubclass(ConfigError, ValueError)


# --- machines ---------------------------------------------------------------------------------


def test_machine_table_matches_paper_tables():
    machines = load_machines()
    assert set(machines) >= {"gb200", "h100", "a100", "h200"}
    gb200, h100, a100 = machines["gb200"], machines["h100"], machines["a100"]
    assert (gb200.sm_count, h100.sm_count, a100.sm_count) == (152, 132, 108)
    assert gb200.fp64_tc_peak_flops == pytest.approx(40.1e12, rel=0.005)
    assert h100.fp64_tc_peak_flops == pytest.approx(66.9e12, rel=0.005)
    assert a100.fp64_core_peak_flops == pytest.approx(9.7e12, rel=0.005)
    assert gb200.hbm_bytes_per_sm_cycle == pytest.approx(25.21, rel=0.005)
    assert [d.shape for d in h100.dmma] == ["m8n8k4", "m16n8k4", "m16n8k8", "m16n8k16"]
    assert [d.flop for d in h100.dmma] == [512, 1024, 2048, 4096]
    assert [d.pipe_cycles for d in h100.dmma] == [4.0, 4.0, 8.0, 16.0]
    assert all(m.source for m in machines.values())


def test_h200():
    h200 = get_machine("H200")
    assert h200.fp64_tc_peak_flops == pytest.approx(66.9e12, rel=1e-3)
    assert h200.fp64_core_peak_flops == pytest.approx(33.45e12, rel=1e-3)
    assert h200.hbm_bandwidth == 4.24e12 and h200.hbm_bandwidth_nominal == 4.8e12
    assert h200.l2_bytes == 60 * 2**20 and h200.arch == "sm_90"
    assert get_machine("h100").hbm_bandwidth == pytest.approx(2.396e12)  # nominal when unmeasured


def test_unknown_machine():
    with pytest.raises(ConfigError, match="h200"):
        get_machine("nope")


NEW_MACHINE = """\
[machines.toy]
description = "a toy"
arch = "sm_90"
compute_capability = "9.0"
sm_count = 10
boost_clock_ghz = 1.0
memory_gib = 1.0
hbm_bandwidth_nominal_tbs = 1.0
fp64_core_flop_per_sm_cycle = 64
fp64_tc_flop_per_sm_cycle = 128
source = "test"
"""


def test_user_file_adds_and_overrides(tmp_path, monkeypatch):
    user = tmp_path / "mine.toml"
    user.write_text(NEW_MACHINE + "[machines.h200]\nhbm_bandwidth_measured_tbs = 4.5\n")
    machines = load_machines(user)
    assert machines["toy"].fp64_tc_peak_flops == pytest.approx(1.28e12)
    assert machines["h200"].hbm_bandwidth == 4.5e12
    assert machines["h200"].sm_count == 132
    assert "mine.toml" in machines["h200"].source
    monkeypatch.setenv("COMPOSER_MACHINES", str(user))
    assert get_machine("toy").sm_count == 10


def test_override_drops_stale_stated_values(tmp_path):
    user = tmp_path / "mine.toml"
    user.write_text("[machines.h100]\nsm_count = 66\n")
    assert load_machines(user)["h100"].stated == {}


@pytest.mark.parametrize(
    "text, fragments",
    [
        (
            NEW_MACHINE.replace("sm_count = 10", "sm_count = 'ten'"),
            ["machines.toy.sm_count", "positive integer"],
        ),
        (NEW_MACHINE.replace('source = "test"\n', ""), ["machines.toy.source", "missing"]),
        (NEW_MACHINE + "colour = 'red'\n", ["machines.toy.colour", "unknown key"]),
        (NEW_MACHINE.replace('arch = "sm_90"', 'arch = "hopper"'), ["machines.toy.arch"]),
        (
            NEW_MACHINE + "[[machines.toy.dmma]]\nshape = 'm8n8'\npipe_cycles = 4.0\n",
            ["machines.toy.dmma[0].shape"],
        ),
        (
            NEW_MACHINE + "[machines.toy.stated]\nfp64_tc_peak_tflops = 2.0\n",
            ["machines.toy.stated.fp64_tc_peak_tflops"],
        ),
        ("[machines.h200]\nsm_count = 0\n", ["machines.h200.sm_count"]),
        ("[machine.x]\n", ["machine", "unknown key"]),
        ("[machines.toy\n", ["TOML syntax error"]),
    ],
)
def test_bad_machine_file(tmp_path, text, fragments):
    user = tmp_path / "bad.toml"
    user.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_machines(user)
    message = str(info.value)
    assert "bad.toml" in message
    for fragment in fragments:
        assert fragment in message, message
