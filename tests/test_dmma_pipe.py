"""The register-only DMMA loops (composer.bench.dmma_pipe, tools/dmma_pipe.py): each shape's
latency and issue interval against chains per warp and warps per SM.

CPU: every (shape, chains) loop compiles for sm_90 to that shape's DMMA only, with unroll x chains
of them in its hot loop and no memory instruction or spill there (what the clock measures is the
tensor pipe); the summary's latency, interval and in-flight count from known points; the tool's
bad input is one line. GPU (marked): the loops run one block per SM, and more chains never cost
more cycles per DMMA than fewer."""

from __future__ import annotations

import pytest

from composer.bench.dmma_pipe import CHAINS, UNROLL, LoopPoint, kernel_name, loop_source, summarize

from tests.test_fused_cpu import needs_nvrtc


@needs_nvrtc
@pytest.mark.parametrize("shape", ["8x8x4", "16x8x4", "16x8x8"])
def test_loops_issue_only_their_shape_in_a_memory_free_hot_loop(shape: str) -> None:
    from composer.arch.hotloop import kernel_hot_loop
    from composer.arch.sass import inspect_cubin
    from composer.runtime.nvrtc import compile_cuda

    for chains in CHAINS:
        name = kernel_name(shape, chains)
        compiled = compile_cuda(loop_source(shape, chains), f"{name}.cu", arch="sm_90", entry_points=[name])
        sass = next(iter(inspect_cubin(compiled.cubin).values()))
        assert set(sass.dmma) == {shape} and sass.spill_bytes == 0, (name, sass.dmma, sass.spill_bytes)
        loop = kernel_hot_loop(compiled.cubin)
        assert loop.counts.get("DMMA") == UNROLL * chains, (name, loop.counts)
        assert not any(loop.counts.get(op) for op in ("LDG", "LDS", "STS", "LDL", "STL", "BAR")), (name, loop.counts)


def test_summary_reads_latency_interval_and_the_chains_it_takes() -> None:
    points = [LoopPoint("16x8x8", 1, 1, 64.0, 132, 132), LoopPoint("16x8x8", 8, 1, 16.0, 132, 132),
              LoopPoint("16x8x8", 8, 16, 128.0, 132, 132), LoopPoint("8x8x4", 1, 1, 32.0, 132, 132),
              LoopPoint("8x8x4", 4, 4, 4.0, 132, 132)]
    summary = summarize(points)
    # 16 warps over 4 sub-partitions: 128 cycles per DMMA of a warp is an interval of 32 per sub-partition
    assert points[2].subpartition_interval == 32.0 and points[1].subpartition_interval == 16.0
    assert summary["16x8x8"] == {"latency_cycles": 64.0, "interval_cycles": 16.0, "in_flight_to_saturate": 4.0}
    assert summary["8x8x4"]["latency_cycles"] == 32.0 and summary["8x8x4"]["interval_cycles"] == 4.0


def _tool():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("dmma_pipe_tool", Path(__file__).parents[1] / "tools" / "dmma_pipe.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_tool_summary_is_one_line_per_shape_and_flags_shared_sms() -> None:
    points = [LoopPoint("8x8x4", 1, 1, 32.0, 132, 132), LoopPoint("8x8x4", 4, 4, 4.0, 132, 131)]
    lines = _tool().summary_lines(summarize(points), points)
    assert lines[1].split() == ["8x8x4", "32.0", "4.0", "8.0"]
    assert lines[-1].startswith("warning: 1 points ran blocks on shared SMs")


def test_tool_rejects_bad_input_in_one_line(capsys) -> None:
    tool = _tool()
    with pytest.raises(SystemExit):
        tool.main(["--shapes", "8x8x3"])
    assert "unknown MMA shape '8x8x3'" in capsys.readouterr().err
    assert tool.main(["--warps", "64"]) == 2
    assert capsys.readouterr().err.strip() == "error: --warps: at most 32 warps (1024 threads) per block"


@pytest.mark.gpu
def test_loops_run_one_block_per_sm_and_chains_hide_latency() -> None:
    from composer.bench.dmma_pipe import measure
    from composer.runtime import Device

    device = Device()
    try:
        points = measure(device, ["8x8x4", "16x8x8"], chains=(1, 4), warps=(1, 4), trips=1024)
    finally:
        device.close()
    for p in points:
        assert p.distinct_sms == p.blocks == device.sm_count, p
        assert p.cycles_per_dmma > 0, p
    for shape in ("8x8x4", "16x8x8"):
        one, four = (next(p for p in points if p.shape == shape and p.chains == c and p.warps == 1) for c in (1, 4))
        assert four.cycles_per_dmma <= one.cycles_per_dmma * 1.01, (one, four)


def test_measure_leaves_out_blocks_the_loop_cannot_launch(monkeypatch) -> None:
    """Session 24 call 1: the m16n8k4 8-chain loop's registers allow fewer than 16 warps per block and the launch
    failed (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES). measure() must skip warps above the kernel's own limit and launch
    the rest; stand-ins for the runtime record what is launched."""
    import numpy as np

    import composer.runtime as runtime
    import composer.runtime.nvrtc as nvrtc
    from composer.bench import dmma_pipe

    launched: list[int] = []

    class Buffer:
        def __init__(self, nbytes, device):
            self.nbytes = nbytes

        def to_numpy(self, n, dtype):
            return np.full(n, 4096 * 2 * 30 if dtype == np.int64 else 0, dtype=dtype) + (
                np.arange(n, dtype=dtype) if dtype == np.uint32 else 0)

        def free(self):
            pass

    class Kernel:
        max_threads = 256  # 8 warps

        def set_max_dynamic_smem(self, n):
            pass

        def launch(self, grid, threads, args=(), shared=0):
            if threads > self.max_threads:
                raise RuntimeError("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")
            launched.append(threads // 32)

    class Module:
        @classmethod
        def from_cubin(cls, cubin, device):
            return cls()

        def get_kernel(self, symbol, params):
            return Kernel()

        def close(self):
            pass

    class Compiled:
        cubin = b""

        def symbol(self, name):
            return name

    class Device:
        sm_count, arch, max_smem_optin = 4, "sm_90", 232448

    monkeypatch.setattr(runtime, "DeviceBuffer", Buffer)
    monkeypatch.setattr(runtime, "Module", Module)
    monkeypatch.setattr(nvrtc, "compile_cuda", lambda *a, **k: Compiled())
    points = dmma_pipe.measure(Device(), ["16x8x4"], chains=(2,), warps=(1, 8, 16))
    assert [p.warps for p in points] == [1, 8] and sorted(set(launched)) == [1, 8]
    assert all(p.cycles_per_dmma == pytest.approx(30.0) and p.distinct_sms == 4 for p in points)
