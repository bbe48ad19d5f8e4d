"""The copy kernel of tools/measure_bandwidth.py, checked without a GPU: it compiles for sm_90, every
pass of its ping-pong loop keeps its 16-byte loads and stores (nothing the compiler may drop as a
repeated copy), and small buffers get enough passes per launch to hide the launch."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from composer.bench.bandwidth import _COPY_SOURCE, MIN_BYTES_PER_LAUNCH, copy_passes


def test_big_buffers_copy_once_and_l2_resident_ones_many_times():
    assert copy_passes(2 * 2**30) == 1
    assert copy_passes(8 * 2**20) == MIN_BYTES_PER_LAUNCH // (2 * 8 * 2**20)  # 192 passes of 16 MiB
    assert 2 * 8 * 2**20 * copy_passes(8 * 2**20) >= MIN_BYTES_PER_LAUNCH
    assert copy_passes(3 * 2**20 + 1) * 2 * (3 * 2**20 + 1) >= MIN_BYTES_PER_LAUNCH


def test_the_copy_kernel_keeps_its_vector_loads_and_stores_inside_the_pass_loop():
    from composer.arch.sass import disassemble, function_sass
    from composer.runtime import compile_cuda

    try:
        compiled = compile_cuda(_COPY_SOURCE, "stream_copy.cu", arch="sm_90", entry_points=["stream_copy"],
                                use_cache=False)
    except Exception as exc:  # no NVRTC on this machine
        pytest.skip(f"NVRTC unavailable: {exc}")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "copy.cubin"
        cubin.write_bytes(compiled.cubin)
        try:
            text = disassemble(cubin)
        except Exception as exc:  # no cuobjdump
            pytest.skip(f"cuobjdump unavailable: {exc}")
    sass = next(iter(function_sass(text).values()))
    loads = sass.count("LDG.E.128")
    stores = sass.count("STG.E.128")
    # the unrolled body (4 + 4) and the remainder (1 + 1), each once: not hoisted out of the pass loop
    assert loads >= 5 and stores >= 5, (loads, stores)
    assert sass.count("BRA") >= 3  # the pass loop, the unrolled loop, the remainder loop
