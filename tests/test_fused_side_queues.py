"""``side_queues`` (issue 16, p = 7 and 15 bound by the link between the L2 partitions): each block of a box
kernel takes its work number from the queue of the L2 side its SM is near, side 0 upwards and side 1
downwards.

CPU: the key's parsing, round trip and refusals (streamed kernels, clusters, chunks, descending kernels);
the family; the rendered kernel (the prologue, every block number replaced by the queue's, nothing else
changed; the default sources unchanged); its signature; the side maps and the path option; the compiled
kernels' registers and SASS (the %smid read and the atomics). GPU (marked): the family's tables against the
reference on small non-cubic grids and the Table S29 grid with each side map, twice in a row (the counters
reset themselves), and the counters left at zero."""

from __future__ import annotations

import dataclasses
import re
import tomllib

import numpy as np
import pytest

from composer.errors import ConfigError
from composer.fused.builder import SIDE_QUEUE_PARAMS, build, kernel_plans, render_volume, volume_signature
from composer.fused.candidates import label, side_queue_candidates, to_table
from composer.fused.config import fused_config, parse_table

from tests.test_fused_cpu import _sass, needs_nvrtc

BOX7 = {"flux": "inline", "mma": "8x8x4", "side_queues": True,
        "kernels": [{"dirs": "xyz", "box": [8, 8, 8], "threads": 256, "tile": [1, 1]}]}


def _queued(variant: str, order: int):
    base = fused_config(variant, order)
    return base, dataclasses.replace(base, side_queues=True)


def test_the_key_parses_and_round_trips() -> None:
    config = parse_table("FUSED_TC", 7, BOX7)
    assert config.side_queues
    again = parse_table("FUSED_TC", 7, tomllib.loads(to_table(config))["paths"]["FUSED_TC"])
    assert again == config and "sideq" in label(config)
    assert not parse_table("FUSED_TC", 7, {**BOX7, "side_queues": False}).side_queues


@pytest.mark.parametrize("change,match", [
    ({"side_queues": 1}, "true or false"),
    ({"chunk_elements": 64}, "chunk_elements"),
    ({"kernels": [{**BOX7["kernels"][0], "descending": True}]}, "descending"),
    ({"kernels": [{"dirs": "xyz", "box": [8, 8, 8], "threads": 256, "tile": [1, 1], "cluster": 2}], "d_stage": "smem"},
     "cluster"),
])
def test_bad_tables_are_one_clear_error(change: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as err:
        parse_table("FUSED_TC", 7, {**BOX7, **change})
    assert "\n" not in str(err.value)


def test_streamed_tables_refuse_it() -> None:
    from composer.fused.config import side_queues_problem

    base = fused_config("FUSED_TC16", 255)
    assert base.volume == "stream"
    assert "box kernels" in side_queues_problem(dataclasses.replace(base, side_queues=True))
    assert side_queue_candidates("FUSED_TC16", 255) == []


def test_the_family_queues_the_box_schedules_without_clusters() -> None:
    for variant in ("FUSED", "FUSED_TC", "FUSED_TC16"):
        found = side_queue_candidates(variant, 7)
        base = fused_config(variant, 7)
        assert [c for _, c in found] == [dataclasses.replace(base, side_queues=True)]
    # p = 15's tensor-core tables run their xyz kernel over clusters of two: nothing to queue there
    assert side_queue_candidates("FUSED_TC", 15) == [] and side_queue_candidates("FUSED_TC16", 15) == []


PROLOGUE = re.compile(r"\{% if side_queues %\}.*?\{% endif %\}", re.S)


@pytest.mark.parametrize("variant,order", [("FUSED", 7), ("FUSED_TC", 7), ("FUSED_TC16", 7), ("FUSED_TC", 31)])
def test_the_kernel_differs_only_in_its_prologue_and_work_number(variant: str, order: int) -> None:
    base, queued = _queued(variant, order)
    for plain_plan, queued_plan in zip(kernel_plans(base), kernel_plans(queued)):
        plain, text = render_volume(base, plain_plan), render_volume(queued, queued_plan)
        assert "blockIdx" in plain and "work_queue" not in plain
        head, body = text.split("    const unsigned int work = work_slot;\n", 1)
        assert "%%smid" in head and head.count("atomicAdd") == 2 and head.count("atomicExch") == 3
        # the body is the plain kernel's with every block number taken from the queue
        assert "blockIdx.x" not in body
        assert re.sub(r"\bwork\b", "blockIdx.x", body) in plain
        assert len(volume_signature(queued)) == len(volume_signature(base)) + len(SIDE_QUEUE_PARAMS)
        assert volume_signature(queued)[-len(SIDE_QUEUE_PARAMS):] == SIDE_QUEUE_PARAMS


def test_side_maps_and_the_option() -> None:
    from composer.runtime.l2_sides import SMID_SLOTS, sm_side_map
    from composer.paths.fused import sm_sides_option

    (zero, zsrc), (alternate, asrc) = sm_side_map(None, "zero"), sm_side_map(None, "alternate")
    assert zero.shape == alternate.shape == (SMID_SLOTS,) and zero.dtype == np.uint8
    assert not zero.any() and list(alternate[:4]) == [0, 1, 0, 1] and (zsrc, asrc) == ("zero", "alternate")
    with pytest.raises(ValueError, match="probe"):
        sm_side_map(None, "half")
    assert sm_sides_option("alternate") == "alternate" and sm_sides_option("lines") == "lines"
    with pytest.raises(ValueError, match="expected one of probe, lines, alternate, zero"):
        sm_sides_option("random")


class _FakeDevice:
    name, ordinal, active_sms, sm_count = "fake", 0, None, 4


@pytest.mark.parametrize("reference,matrix,kind,expected", [
    (([0, 1, 2, 3], [0, 1, 1, 0]), ([0, 1, 2, 3], [1, 1, 0, 0]), "probe", ([1, 1, 0, 0], "lines")),
    (([0, 1, 2, 3], [0, 1, 1, 0]), None, "probe", ([0, 1, 1, 0], "reference")),
    (None, None, "probe", ([0, 0, 0, 0], "none")),
    (([0, 1, 2, 3], [0, 1, 1, 0]), None, "lines", ([0, 0, 0, 0], "none")),
])
def test_the_probed_map_prefers_the_matrix_form(monkeypatch, reference, matrix, kind, expected) -> None:
    """``probe`` takes the matrix form's split, the reference design's where the matrix form shows one level,
    else none; ``lines`` never asks the reference (session 40: the matrix form agreed 1.0 on two H100s, the
    reference design found no split on one and an implausible one on the other). Measured once per process."""
    from composer.runtime import l2_sides

    calls = []
    monkeypatch.setattr(l2_sides, "_SIDE_MAPS", {})
    monkeypatch.setattr(l2_sides, "L2Probe", lambda device: type("P", (), {"close": lambda self: None})())
    monkeypatch.setattr(l2_sides, "_reference_split", lambda probe, device: calls.append("reference") or reference)
    monkeypatch.setattr(l2_sides, "_matrix_split", lambda probe, device: calls.append("lines") or matrix)
    table, source = l2_sides.sm_side_map(_FakeDevice(), kind)
    assert (list(table[:4]), source) == (expected[0], expected[1]) and not table[4:].any()
    assert calls == (["lines"] if kind == "lines" or matrix else ["lines", "reference"])
    measured = len(calls)
    again, _ = l2_sides.sm_side_map(_FakeDevice(), kind)
    assert list(again[:4]) == expected[0] and len(calls) == measured  # cached: no second measurement


@needs_nvrtc
@pytest.mark.parametrize("variant", ["FUSED", "FUSED_TC", "FUSED_TC16"])
def test_queued_kernels_compile_with_their_registers(variant: str) -> None:
    base, queued = _queued(variant, 7)
    for kernel, plain in zip(build(queued, "sm_90").kernels, build(base, "sm_90").kernels):
        sass, one = _sass(kernel), _sass(plain)
        print(f"{kernel.name}: {sass.registers} regs ({one.registers} unqueued), {sass.spill_bytes} B local")
        assert sass.registers <= one.registers + 4 and sass.spill_bytes == one.spill_bytes


@pytest.mark.gpu
@pytest.mark.parametrize("grid", [(4, 3, 2), "s29"])
@pytest.mark.parametrize("sides", ["probe", "lines", "alternate", "zero"])
def test_queued_tables_match_the_reference_twice(grid, sides: str) -> None:
    """Each side map, two calls in a row on one path (the counters the first call leaves are the second's):
    both validate, and the counters are zero after each."""
    from composer import dg
    from composer.config.schedules import load_schedule
    from composer.paths.problem import DeviceProblem
    from composer.paths.registry import path_class
    from composer.runtime import default_device

    order = 7
    grid = load_schedule(order).benchmark.grid if grid == "s29" else grid
    fields = dg.make_fields(order, grid, varying=True)
    ref = dg.reference_tendency(fields, order, grid)
    device = default_device()
    for variant in ("FUSED", "FUSED_TC", "FUSED_TC16"):
        for _, config in side_queue_candidates(variant, order):
            if config.x_pairs and grid[0] % 2:
                continue
            if config.element_bricks and grid != load_schedule(order).benchmark.grid:
                config = dataclasses.replace(config, element_bricks=None)
            problem = DeviceProblem.upload(fields, order, grid, device)
            try:
                path = path_class(variant)(problem, config=config, sm_sides=sides)
                for call in range(2):
                    problem.dqdt.copy_from(np.full(ref.shape, np.nan), problem.stream)
                    path.launch(problem.ptr("q"), problem.dqdt.ptr)
                    out = problem.download(problem.dqdt)
                    err = float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))
                    assert err <= 1e-12, f"{variant} {sides} call {call}: {err:.3e}"
                    counters = path.side_queue[1].to_numpy(4 * len(path.launch_blocks()), np.uint32, stream=problem.stream)
                    problem.stream.synchronize()
                    assert not counters.any(), counters
                    print(f"{variant} {sides} call {call}: {err:.2e}, {path.diagnostics()}")
                path.close()
            finally:
                problem.close()
