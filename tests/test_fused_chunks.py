"""``chunk_elements``: the box kernels of a multi-kernel fused table launched chunk by chunk, one lane per
kernel, so that a later kernel reads the q and dqdt an earlier one touched from L2 (composer.paths.fused).

CPU: the key's errors; the chunks partition the elements; the rendered kernel takes e0 and the
unchunked source does not change; the declared nodes, their hazards and the launch plan (one lane per
kernel, the data edge of each chunk, the window that keeps the lanes within two chunks, two streams);
the path end to end on fake streams, each launch it issues emulated over the elements its own e0 and ne
name (composer.fused.emulate), against the reference; the family's candidates round-trip through
their tables and keep the unchunked kernels' blocks per SM. GPU (marked): chunked tables at p = 31 and
63 against the reference on the point-varying input, on a small non-cubic grid with one element per
chunk and on the Table S29 grid."""

from __future__ import annotations

import dataclasses
import tomllib

import pytest

from composer.errors import ConfigError
from composer.fused.builder import CHUNKED_VOLUME_SIGNATURE, VOLUME_SIGNATURE, kernel_plans, kernel_sources, render_volume
from composer.fused.candidates import candidate_list, chunk_candidates, label, to_table
from composer.fused.config import fused_config, parse_table
from composer.paths.base import cost_machine
from composer.paths.fused import CHUNK_WINDOW, chunk_ranges
from composer.paths.registry import path_class
from composer.sched.graph import RAW, RES, build_graph
from composer.paths.program import PROBLEM_INPUTS

from tests.test_fused_cpu import needs_nvrtc

XY_Z31 = {"flux": "inline", "mma": "8x8x4", "pair_io": True,
          "kernels": [{"dirs": "xy", "box": [2, 32, 32], "threads": 256, "tile": [2, 2]},
                      {"dirs": "z", "box": [32, 2, 32], "threads": 256, "tile": [2, 2]}]}


def test_chunk_errors_name_the_key() -> None:
    with pytest.raises(ConfigError, match=r"chunk_elements: expected an integer in \[1, "):
        parse_table("FUSED_TC", 31, dict(XY_Z31, chunk_elements=0))
    with pytest.raises(ConfigError, match="chunk_elements: expected an integer"):
        parse_table("FUSED_TC", 31, dict(XY_Z31, chunk_elements=True))
    one = {"flux": "inline", "mma": "8x8x4",
           "kernels": [{"dirs": "xyz", "box": [16, 16, 16], "threads": 512, "tile": [2, 1]}]}
    with pytest.raises(ConfigError, match="chunk_elements: needs two or more volume kernels"):
        parse_table("FUSED_TC", 15, dict(one, chunk_elements=4))
    stream = tomllib.loads(to_table(fused_config("FUSED_TC16", 255)))["paths"]["FUSED_TC16"]
    with pytest.raises(ConfigError, match="chunk_elements: applies to the box kernels"):
        parse_table("FUSED_TC16", 255, dict(stream, chunk_elements=1))
    assert parse_table("FUSED_TC", 31, dict(XY_Z31, chunk_elements=16)).chunk_elements == 16


def test_chunks_partition_the_elements() -> None:
    assert chunk_ranges(10, 0) == [(0, 10)]
    assert chunk_ranges(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert chunk_ranges(8, 8) == [(0, 8)] and chunk_ranges(3, 5) == [(0, 3)]
    for ne, size in ((512, 16), (64, 3), (7, 1)):
        covered = [e for first, end in chunk_ranges(ne, size) for e in range(first, end)]
        assert covered == list(range(ne))


def test_rendered_kernel_takes_the_chunk_and_the_default_is_unchanged() -> None:
    plain = parse_table("FUSED_TC", 31, XY_Z31)
    chunked = dataclasses.replace(plain, chunk_elements=16)
    for p_plan, c_plan in zip(kernel_plans(plain), kernel_plans(chunked)):
        source, unchunked = render_volume(chunked, c_plan), render_volume(plain, p_plan)
        assert "i64 ne, unsigned e0)" in source and "const i64 e = e0 + blockIdx.x / NBOX;" in source
        assert "e0" not in unchunked and "const i64 e = blockIdx.x / NBOX;" in unchunked
    assert {k.signature for k in kernel_sources(chunked)} == {CHUNKED_VOLUME_SIGNATURE}
    assert {k.signature for k in kernel_sources(plain)} == {VOLUME_SIGNATURE}
    assert [p.name for p in CHUNKED_VOLUME_SIGNATURE[-2:]] == ["ne", "e0"]


def _plan(config, ne: int):
    machine = cost_machine("sm_90", 132)
    return path_class(config.variant).launch_plan(config.order, ne, machine, config=config)


def test_nodes_hazards_and_the_two_lane_plan() -> None:
    config = dataclasses.replace(parse_table("FUSED_TC", 31, XY_Z31), chunk_elements=100)
    nodes = path_class("FUSED_TC").program(31, 512, cost_machine("sm_90", 132), config=config)
    xy, z = (k.name for k in kernel_sources(config))
    assert [n.name for n in nodes] == [f"{k}#{c}" for c in range(6) for k in (xy, z)]
    assert nodes[-1].grid == 12 * 16 and nodes[0].grid == 100 * 16  # blocks: the chunk's elements x boxes
    graph = build_graph(nodes, PROBLEM_INPUTS)
    for c in range(6):
        assert (RAW, f"dqdt#{c}") in graph.edges[f"{xy}#{c}", f"{z}#{c}"]["hazards"]
        if c:
            assert (RES, xy) in graph.edges[f"{xy}#{c - 1}", f"{xy}#{c}"]["hazards"]
            assert (RES, z) in graph.edges[f"{z}#{c - 1}", f"{z}#{c}"]["hazards"]
        if c >= CHUNK_WINDOW:  # the first lane waits for the last lane CHUNK_WINDOW chunks back
            assert (RES, f"chunk_window{c % CHUNK_WINDOW}") in graph.edges[f"{z}#{c - CHUNK_WINDOW}", f"{xy}#{c}"]["hazards"]
    plan = _plan(config, 512)
    assert plan.streams == 2
    # chunk c's z and chunk c + 1's xy on different streams: they run side by side
    assert all(plan.stream_of[f"{z}#{c}"] != plan.stream_of[f"{xy}#{c + 1}"] for c in range(5))
    unchunked = _plan(parse_table("FUSED_TC", 31, XY_Z31), 512)
    assert unchunked.streams == 1 and [n for n in unchunked.issue_order] == [xy, z]


def test_candidates_label_and_round_trip() -> None:
    assert chunk_candidates("FUSED_TC", 15) == [] and chunk_candidates("FUSED_TC16", 255) == []
    sizes = {31: [8, 16, 32, 64, 128], 63: [1, 2, 4, 8, 16]}
    for variant in ("FUSED", "FUSED_TC", "FUSED_TC16"):
        for order in (31, 63):
            found = chunk_candidates(variant, order)
            assert [c.chunk_elements for _, c in found] == sizes[order]
            assert [n for n, _ in candidate_list(variant, order, "chunks")][1:] == [n for n, _ in found]
            for name, config in found:
                assert label(config) == name and name.endswith(f" chunk{config.chunk_elements}")
                table = tomllib.loads(to_table(config))["paths"][variant]
                assert fused_config(variant, order, {variant: table}) == config


@needs_nvrtc
@pytest.mark.parametrize("variant", ["FUSED", "FUSED_TC", "FUSED_TC16"])
def test_chunked_kernels_keep_the_unchunked_blocks_per_sm(variant: str) -> None:
    """e0 is one more argument and one add: the chunked kernels hold as many blocks per SM by their
    registers as the unchunked ones, without spills."""
    from composer.arch.sass import inspect_cubin
    from composer.fused.builder import build

    def blocks_by_registers(config):
        out = []
        for k in build(config, "sm_90").kernels:
            sass = next(iter(inspect_cubin(k.compiled.cubin).values()))
            assert sass.spill_bytes == 0, k.name
            out.append(65536 // (-(-sass.registers // 8) * 8 * k.threads))
        return out

    for order in (31, 63):
        base = fused_config(variant, order)
        _, chunked = chunk_candidates(variant, order)[0]
        assert blocks_by_registers(dataclasses.replace(chunked, nvrtc=None)) == \
            blocks_by_registers(dataclasses.replace(base, nvrtc=None))


@pytest.fixture(scope="module")
def device():
    from composer.runtime import default_device

    return default_device()


@pytest.mark.gpu
@pytest.mark.parametrize("variant,order", [("FUSED", 31), ("FUSED_TC", 31), ("FUSED_TC16", 31), ("FUSED_TC", 63),
                                           ("FUSED_TC16", 63)])
@pytest.mark.parametrize("grid_kind", ["small", "benchmark"])
def test_chunked_tables_match_the_reference_on_the_gpu(device, variant: str, order: int, grid_kind: str) -> None:
    """The family's chunked tables (on the small grid, one element per chunk: every element its own
    pair of launches) against the reference on the point-varying input, max|diff|/max|ref| <= 1e-12."""
    from tests.test_fused_gpu import assert_candidates_validate

    found = chunk_candidates(variant, order)
    if grid_kind == "small":
        found = [("chunk1", dataclasses.replace(found[0][1], chunk_elements=1))]
    assert_candidates_validate(device, order, grid_kind, found)


def test_a_captured_plan_is_issued_once_per_pointer_pair_and_replayed(monkeypatch) -> None:
    """``Path.capture_plan``: the first call with a (q, dqdt) pair captures the plan's steps into a graph,
    later calls with it replay that graph; another pair gets its own; inside a capture under way (bench
    --graph) the steps are issued into it; close() frees the graphs."""
    import composer.paths.base as base

    issued, replays, closed, capturing = [], [], [], [False]

    class Graph:
        @classmethod
        def capture(cls, fn, stream):
            graph = cls()
            fn(stream)
            return graph

        def replay(self, stream) -> None:
            replays.append(self)

        def close(self) -> None:
            closed.append(self)

    monkeypatch.setattr(base, "CudaGraph", Graph)
    monkeypatch.setattr(base, "is_capturing", lambda stream: capturing[0])
    monkeypatch.setattr(base, "run_plan", lambda plan, streams, events, launchers: issued.append(launchers))

    class Chunked(base.Path):
        name = "CHUNKED_TEST"
        capture_plan = True

        @classmethod
        def program(cls, order, num_elements, machine, **options):
            return []

        def bind(self, q_ptr, dqdt_ptr):
            return {"pair": (q_ptr, dqdt_ptr)}

    path = object.__new__(Chunked)
    path.problem = type("Problem", (), {"stream": "main"})()
    path.plan, path.side_streams, path.events = None, [], {}
    for q, out in ((1, 9), (1, 9), (2, 9), (1, 9)):
        path.launch(q, out)
    assert issued == [{"pair": (1, 9)}, {"pair": (2, 9)}] and len(replays) == 4
    assert replays[0] is replays[1] is replays[3] and replays[2] is not replays[0]
    capturing[0] = True
    path.launch(1, 9)
    assert issued[-1] == {"pair": (1, 9)} and len(issued) == 3 and len(replays) == 4
    capturing[0] = False
    # at most MAX_PLAN_GRAPHS pairs: the least recently used one goes (here (2, 9): (1, 9) was used since)
    for q in range(3, 3 + base.MAX_PLAN_GRAPHS - 1):
        path.launch(q, 9)
    assert len(closed) == 1 and closed[0] is replays[2]
    path.launch(1, 9)
    assert len(issued) == 3 + base.MAX_PLAN_GRAPHS - 1  # (1, 9) was kept: replayed, not captured again
    path.close()
    assert len(closed) == base.MAX_PLAN_GRAPHS + 1


def test_a_chunked_table_built_in_code_is_checked_like_a_parsed_one() -> None:
    """Candidates skip parse_table: the builder refuses chunk_elements beside another element mapping
    (x_pairs, trace clusters, several elements per block), whose template branches ignore e0."""
    from composer.errors import ComposerError

    paired = fused_config("FUSED_TC16", 7)
    assert paired.x_pairs
    with pytest.raises(ComposerError, match="chunk_elements 4 "):
        kernel_sources(dataclasses.replace(paired, chunk_elements=4))
    with pytest.raises(ComposerError, match="chunk_elements 1 applies to the box kernels"):
        kernel_sources(dataclasses.replace(fused_config("FUSED_TC16", 255), chunk_elements=1))


def test_the_face_kernel_runs_once_before_every_chunk() -> None:
    """flux = "array": the face kernel writes fstar once; every chunk's kernels read it."""
    config = dataclasses.replace(parse_table("FUSED_TC", 31, dict(XY_Z31, flux="array")), chunk_elements=200)
    nodes = path_class("FUSED_TC").program(31, 512, cost_machine("sm_90", 132), config=config)
    face, *volume = nodes
    assert face.role == "face_flux" and face.writes == ("fstar",) and len(volume) == 6
    graph = build_graph(nodes, PROBLEM_INPUTS)
    assert all((RAW, "fstar") in graph.edges[face.name, n.name]["hazards"] for n in volume)
    assert path_class("FUSED_TC").plan_settings(31, config=config) == "chunk_elements=200"
    assert path_class("FUSED_TC").plan_settings(31) == ""


def test_chunk_node_times_round_trip_through_toml() -> None:
    """A chunked table's node names hold '#', which TOML reads as a comment in a bare key: quoted."""
    from composer.sched.node_times import render_node_times

    text = render_node_times({("h100_sxm", "FUSED_TC", 31, "chunk_elements=128"): {"fused_tc_p31_k0_xy#0": 101.5,
                                                                                 "fused_tc_p31_k1_z#0": 70.0}}, "t")
    table = tomllib.loads(text)["h100_sxm"]["FUSED_TC"]["p31"]
    assert table["nodes"] == {"fused_tc_p31_k0_xy#0": 101.5, "fused_tc_p31_k1_z#0": 70.0}


def test_resources_are_normalised_and_reported_as_lists() -> None:
    from composer.sched.graph import DataFlowError, KernelNode
    from composer.sched.plan import plan
    from composer.sched.report import describe

    node = KernelNode("a", "r", writes=("x",), resource=["lane", "window0"])
    assert node.resource == ("lane", "window0") and node.resources == ("lane", "window0")
    assert KernelNode("b", "r", resource="dram").resources == ("dram",)
    for bad in ((), ("lane", ""), ""):
        with pytest.raises(DataFlowError, match="resources must be non-empty names"):
            KernelNode("c", "r", resource=bad)
    report = describe(plan(build_graph([node], ()), 2))
    assert report["nodes"][0]["resource"] == ["lane", "window0"]


@needs_nvrtc
def test_the_chunked_path_launches_compute_the_reference(monkeypatch) -> None:
    """The path end to end on the CPU: a chunked FUSED_TC p = 31 table built (NVRTC), its plan issued on fake
    streams, and each launch it makes emulated from its own arguments (read by the kernel signature's
    names: the kernel, its grid, e0 and ne) over the elements they name, in issue order. The result is
    the reference's: a wrong e0/ne, a missed or doubled chunk or a z launch issued before its xy launch
    would show."""
    import numpy as np

    import composer.paths.base as base
    import composer.paths.fused as fused
    from composer import dg
    from composer.fused.emulate import emulate
    from composer.paths.problem import DeviceProblem

    order, grid = 31, (3, 2, 1)  # 6 elements in chunks of 4 and 2
    config = dataclasses.replace(parse_table("FUSED_TC", order, XY_Z31), chunk_elements=4)
    volume = [k.name for k in kernel_sources(config) if k.index is not None]
    issued: list[tuple[int, int, int]] = []

    class Buffer:
        def __init__(self, ptr: int) -> None:
            self.ptr = ptr

    class Kernel:
        def __init__(self, name: str, signature) -> None:
            self.name, self.signature = name, signature

        def resident_blocks(self, threads: int, smem: int) -> int:
            return 2

        def launch(self, grid_blocks, block, args, smem, stream, cluster=None) -> None:
            a = dict(zip((p.name for p in self.signature), args))
            first, end = a["e0"], a["ne"]
            blocks = next(k.blocks_per_element for k in kernel_sources(config) if k.name == self.name)
            assert grid_blocks == (end - first) * blocks and a["dqdt"] == 0xD0 and a["q"] == 0x10
            issued.append((volume.index(self.name), first, end))

    class Module:
        @classmethod
        def from_cubin(cls, cubin, device):
            return cls()

        def get_kernel(self, symbol, signature, threads, smem):
            assert symbol in volume  # extern "C": the entry point is the kernel's name
            return Kernel(symbol, signature)

        def close(self) -> None:
            pass

    class Stream:
        def __init__(self, device=None, priority: int = 0) -> None:
            self.priority = priority

        def wait(self, event) -> None:
            pass

        def close(self) -> None:
            pass

    class Event:
        def __init__(self, device=None, timing: bool = True) -> None:
            pass

        def record(self, stream) -> None:
            pass

        def close(self) -> None:
            pass

    monkeypatch.delenv("COMPOSER_BUILD_DIR", raising=False)
    monkeypatch.setattr(fused, "Module", Module)
    monkeypatch.setattr(base, "Stream", Stream)
    monkeypatch.setattr(base, "Event", Event)
    monkeypatch.setattr(base, "is_capturing", lambda stream: True)  # issue the plan as it is
    device = type("Device", (), {"arch": "sm_90", "sm_count": 132, "total_memory": 80 << 30})()
    fields = {name: Buffer(0x10 + i) for i, name in enumerate(dg.FIELD_KEYS)}
    problem = DeviceProblem(order, grid, device, Stream(), fields, Buffer(0x1), Buffer(0x2), Buffer(0x3),
                            Buffer(0x4), Buffer(0xD0),
                            extra={"vmapM32": Buffer(0x5), "vmapP32": Buffer(0x6)})
    path = path_class("FUSED_TC")(problem, config=config)
    path.launch(problem.ptr("q"), problem.dqdt.ptr)
    assert sorted(issued) == [(0, 0, 4), (0, 4, 6), (1, 0, 4), (1, 4, 6)]
    values = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(values, order, grid)
    out = emulate(config, values, grid, launches=issued)
    assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13
