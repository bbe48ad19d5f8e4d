"""Measured node times as the launch plan's weights (composer.sched.node_times, the node_us option)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from composer.arch.machines import load_machines
from composer.config.fields import parse_toml
from composer.errors import ComposerError
from composer.paths.registry import path_class
from composer.sched import node_times
from composer.sched.node_times import (NodeTimesError, load_node_times, measured_weights, parse_node_times,
                                       record_times, render_node_times, times_from_measure)

ROOT = Path(__file__).resolve().parents[1]
H200 = load_machines()["h200"]
P7_ELEMENTS = 32**3


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(tmp_path / "user"))
    node_times.clear_cache()
    yield
    node_times.clear_cache()


def _plan(path: str, order: int, elements: int, **options):
    cls = path_class(path)
    return cls.launch_plan(order, elements, H200, **cls.parse_options(options))


def test_shipped_file_is_what_the_tool_generates_from_the_cited_reports():
    spec = importlib.util.spec_from_file_location("node_times_tool", ROOT / "tools" / "node_times.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert (ROOT / "schedules" / "node_times.toml").read_text() == tool.generate()


def test_shipped_times_name_every_kernel_of_the_library_paths():
    times = load_node_times()
    for path in ("GEMM", "GEMM_CUTE"):
        cls = path_class(path)
        for order in (7, 15, 31, 63, 127, 255, 511, 767):
            nodes = [n.name for n in cls.program(order, 1, H200)]
            assert measured_weights("h200", path, order, nodes, cls.plan_settings(order)) is not None, (path, order)
            assert set(times[("h200", path, order, cls.plan_settings(order))]) == set(nodes)


def test_times_of_other_settings_do_not_apply():
    """GEMM_FUSED's carriers share node names: only the settings tell the recorded times apart."""
    cls = path_class("GEMM_CUTE")
    nodes = [n.name for n in cls.program(63, 1, H200)]
    assert measured_weights("h200", "GEMM_CUTE", 63, nodes, cls.plan_settings(63)) is not None
    other = cls.plan_settings(63, library={"x": "cublas", "y": "cublas", "z": "cublas"})
    assert other != cls.plan_settings(63) and measured_weights("h200", "GEMM_CUTE", 63, nodes, other) is None
    fused = path_class("GEMM_FUSED")
    assert fused.plan_settings(511, carrier="z", fold=True) != fused.plan_settings(511)
    tile = {"bm": 64, "bn": 64, "bk": 16, "warps_m": 2, "warps_n": 2, "stages": 3}
    assert fused.plan_settings(511, carrier_tile=tile) != fused.plan_settings(511)  # a swept tile


def test_one_order_holds_the_times_of_several_settings(tmp_path):
    nodes = [n.name for n in path_class("GEMM").program(7, 1, H200)]
    text = ('[h200.GEMM_FUSED]\np7 = [ { settings = "a", nodes = { x = 1.0 } }, { settings = "b", nodes = { x = 2.0 } } ]\n')
    times = parse_node_times(parse_toml(text, "t"), "t")
    assert times == {("h200", "GEMM_FUSED", 7, "a"): {"x": 1.0}, ("h200", "GEMM_FUSED", 7, "b"): {"x": 2.0}}
    assert parse_node_times(parse_toml(render_node_times(times, "h"), "r"), "r") == times
    with pytest.raises(NodeTimesError, match="two entries with the same settings"):
        parse_node_times(parse_toml('[h200.GEMM]\np7 = [ { settings = "a", nodes = { x = 1.0 } }, '
                                    '{ settings = "a", nodes = { x = 2.0 } } ]\n', "t"), "t")
    # recording a second setting keeps the first
    def report(settings, ms):
        return {"order": 7, "paths": [{"path": "GEMM", "settings": settings,
                                      "measure": {"order": 7, "node_ms": {n: ms for n in nodes}}}]}
    record_times(report("s1", 0.5), "h200", tmp_path / "u")
    record_times(report("s2", 0.7), "h200", tmp_path / "u")
    mine = parse_node_times(parse_toml((tmp_path / "u" / "node_times.toml").read_text(), "u"), "u")
    assert {k[3] for k in mine} == {"s1", "s2"}


def test_hints_bypass_a_user_file_that_does_not_load(tmp_path, monkeypatch):
    user = tmp_path / "user"
    user.mkdir()
    (user / "node_times.toml").write_text('[h200.GEMM]\np7 = { lift = "x" }\n')
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(user))
    node_times.clear_cache()
    assert _plan("GEMM", 7, P7_ELEMENTS, node_us="hints").critical_path == ("surface_flux", "lift")
    with pytest.raises(NodeTimesError, match="non-negative time"):
        _plan("GEMM", 7, P7_ELEMENTS)


def test_partial_node_us_lays_over_the_recorded_times():
    measured = _plan("GEMM", 7, P7_ELEMENTS)
    assert measured.critical_path == ("volume_flux", "gemm_y", "lift")
    # one node given: the others keep their recorded times (not the hints)
    tilted = _plan("GEMM", 7, P7_ELEMENTS, node_us="gemm_x:5000")
    assert tilted.critical_path == ("volume_flux", "gemm_x", "lift")


def test_gemm_p7_plan_follows_the_measured_chain():
    """The session-6 measurement: volume flux -> y GEMM -> lift is the long chain (1352 µs against
    729 µs for face flux -> lift); the hints rank them the other way round."""
    measured = _plan("GEMM", 7, P7_ELEMENTS)
    assert measured.critical_path == ("volume_flux", "gemm_y", "lift")
    assert measured.stream_of["volume_flux"] == 0 and measured.stream_of["surface_flux"] != 0
    hints = _plan("GEMM", 7, P7_ELEMENTS, node_us="hints")
    assert hints.critical_path == ("surface_flux", "lift")
    assert hints.stream_of["surface_flux"] == 0


def test_times_that_do_not_name_the_kernels_are_ignored():
    assert measured_weights("h200", "GEMM", 7, ["volume_flux", "gemm_x"]) is None
    assert measured_weights("h200", "GEMM", 8, ["volume_flux"]) is None
    assert measured_weights("gb200", "GEMM", 7, [n.name for n in path_class("GEMM").program(7, 1, H200)]) is None


def test_node_us_option_mapping_string_and_errors():
    plan = _plan("GEMM", 15, 16**3, node_us="surface_flux:900,volume_flux:1,gemm_x:1,gemm_y:1,gemm_z:1,lift:1")
    assert plan.critical_path == ("surface_flux", "lift")
    cls = path_class("GEMM")
    with pytest.raises(ComposerError, match="node_us names no kernel of the path: volume"):
        cls.launch_plan(7, 8, H200, **cls.parse_options({"node_us": "volume:3"}))
    for bad in ("volume_flux", "volume_flux:-1", ""):
        with pytest.raises(ComposerError):
            cls.parse_options({"node_us": bad})


def test_results_do_not_depend_on_the_weights():
    """Every plan of the same graph orders every hazard (the simulator's check), whichever chain the
    weights make critical."""
    import random

    from composer.sched import hazard_violations, simulate

    rng = random.Random(7)
    for options in ({}, {"node_us": "hints"}, {"max_streams": 2}):
        plan = _plan("GEMM", 7, P7_ELEMENTS, **options)
        for _ in range(50):
            timeline = simulate(plan, {n: rng.uniform(0.1, 10.0) for n in plan.issue_order})
            assert hazard_violations(plan, timeline) == []


@pytest.mark.parametrize("text, message", [
    ('[gx9.GEMM]\np7 = { lift = 1.0 }', "unknown machine 'gx9'"),
    ('[h200.NOPE]\np7 = { lift = 1.0 }', "unknown path"),
    ('[h200.GEMM]\nseven = { lift = 1.0 }', "orders written pN"),
    ('[h200.GEMM]\np7 = { lift = -1.0 }', "non-negative time"),
    ('[h200.GEMM]\np7 = { lift = "fast" }', "non-negative time"),
    ('[h200.GEMM]\np7 = {}', "table of node = microseconds"),
    ('[h200.GEMM]\np7 = { settings = 3, nodes = { lift = 1.0 } }', "settings: expected a string"),
    ('[h200.GEMM]\np7 = { nodes = { lift = 1.0 }, extra = 1 }', "unknown keys"),
])
def test_bad_files_are_one_clear_error(text, message):
    with pytest.raises(NodeTimesError, match=message):
        parse_node_times(parse_toml(text, "t.toml"), "t.toml")


def test_record_times_merges_into_the_user_file_and_wins(tmp_path):
    nodes = [n.name for n in path_class("GEMM").program(7, 1, H200)]
    report = {"order": 7, "paths": [{"path": "GEMM", "settings": "", "measure": {"order": 7, "path": "GEMM",
                                                                                 "node_ms": {n: 0.5 for n in nodes}}}]}
    assert times_from_measure(report, "h200") == {("h200", "GEMM", 7, ""): {n: 500.0 for n in nodes}}
    legacy = {"order": 7, "paths": [{"path": "GEMM", "measure": report["paths"][0]["measure"]}]}
    assert times_from_measure(legacy, "h200") == {}  # no settings recorded, none supplied: left out
    target = record_times(report, "h200", tmp_path / "user")
    assert target == tmp_path / "user" / "node_times.toml"
    assert measured_weights("h200", "GEMM", 7, nodes) == {n: 500e-6 for n in nodes}
    assert measured_weights("h200", "GEMM", 15, [n.name for n in path_class("GEMM").program(15, 1, H200)])


def test_render_round_trips():
    times = {("h200", "GEMM", 7, ""): {"a": 1.25, "b": 2.0},
             ("h200", "GEMM_CUTE", 15, "mma=16x8x4 library=x:cute,y:cute,z:cute"): {"c": 3.0}}
    text = render_node_times(times, "header line")
    assert text.startswith("# header line\n")
    assert parse_node_times(parse_toml(text, "r"), "r") == {k: {n: round(v, 1) for n, v in d.items()}
                                                             for k, d in times.items()}
    json.dumps(text)


def test_the_plan_machine_is_the_gpu_identified_by_its_memory():
    """H100 and H200 share sm_90 and 132 SMs: the memory tells them apart (session 7, call 4: the
    first-match rule priced the H200 as an H100, so its recorded times never applied)."""
    from composer.paths.base import cost_machine

    machines = load_machines()
    assert cost_machine("sm_90", 132, machines["h200"].memory_bytes).name == "h200"
    assert cost_machine("sm_90", 132, machines["h100"].memory_bytes).name == "h100"
    assert cost_machine("sm_90", 98, machines["h200"].memory_bytes).name == "h200"  # a green context
    assert cost_machine("sm_80", 108).arch == "sm_80"
