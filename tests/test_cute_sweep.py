"""CPU tests of the library-assignment sweep (synthetic timings) and the GEMM_CUTE settings."""

from __future__ import annotations

import random

import pytest

from composer.config.schedules import load_schedule
from composer.gemm.cute.sweep import (all_assignments, label, parse_label, sweep,
                                      write_assignment)
from composer.paths.gemm_cute import resolve_settings

# synthetic per-role costs (s): cute wins x and z, cuBLAS wins y
COST = {("x", "cute"): 1.0, ("x", "cublas"): 1.3, ("y", "cute"): 0.9, ("y", "cublas"): 0.6,
        ("z", "cute"): 0.7, ("z", "cublas"): 0.8}


def synthetic(noise: float = 0.0, seed: int = 0):
    rng = random.Random(seed)
    calls = []

    def measure(assignment):
        calls.append(label(assignment))
        return sum(COST[p] for p in assignment) * (1 + noise * rng.uniform(-1, 1))
    return measure, calls


def test_eight_assignments():
    labels = [label(a) for a in all_assignments()]
    assert len(set(labels)) == 8 and "x=cute,y=cublas,z=cute" in labels
    assert parse_label("x=cute,y=cublas,z=cute") == (("x", "cute"), ("y", "cublas"), ("z", "cute"))
    with pytest.raises(ValueError):
        parse_label("x=cute,y=mkl,z=cute")


def test_sweep_finds_winner_under_noise():
    measure, calls = synthetic(noise=0.05)
    result = sweep(measure, rounds=7)
    assert result.winner == "x=cute,y=cublas,z=cute"
    assert len(calls) == 56 and all(len(v) == 7 for v in result.samples.values())
    assert result.speedup_over() == pytest.approx(2.7 / 2.3, rel=0.1)


def test_rounds_are_interleaved_and_rotated():
    measure, calls = synthetic()
    sweep(measure, rounds=3)
    rounds = [calls[i * 8:(i + 1) * 8] for i in range(3)]
    assert all(sorted(r) == sorted(rounds[0]) for r in rounds)  # every candidate once per round
    assert rounds[0][0] != rounds[1][0]  # order rotates between rounds


def test_tie_prefers_cublas():
    result = sweep(lambda a: 1.0, rounds=2)
    assert result.winner == "x=cublas,y=cublas,z=cublas"


def test_bad_measurement_rejected():
    with pytest.raises(ValueError, match="positive"):
        sweep(lambda a: 0.0, rounds=1)


def test_write_assignment_round_trip(tmp_path, monkeypatch):
    text = load_schedule(127)
    src = tmp_path / "p0127.toml"
    from composer.config.schedules import packaged_dir
    src.write_text((packaged_dir() / "p0127.toml").read_text())
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(tmp_path))
    write_assignment(src, {"x": "cute", "y": "cublas", "z": "cute"}, "16x8x4")
    sched = load_schedule(127)
    assert sched.paths["GEMM_CUTE"]["library"] == {"x": "cute", "y": "cublas", "z": "cute"}
    assert sched.benchmark == text.benchmark
    write_assignment(src, {"x": "cublas", "y": "cublas", "z": "cute"}, "8x8x4")  # update in place
    assert src.read_text().count("[paths.GEMM_CUTE]") == 1
    mma, lib = resolve_settings(127, {})
    assert mma == "8x8x4" and lib == {"x": "cublas", "y": "cublas", "z": "cute"}
    mma, lib = resolve_settings(127, {"library": {"x": "cute"}, "mma": "16x8x8"})
    assert mma == "16x8x8" and lib["x"] == "cute"


def test_library_option_from_the_command_line():
    """`--option GEMM_CUTE.library=cute` (every role) or `x=cute,z=cublas` (per role) reach the
    path as strings; bad roles, libraries or syntax stop with a clear error."""
    from composer.errors import ComposerError
    from composer.paths.gemm_cute import library_option

    assert library_option("cute") == {"x": "cute", "y": "cute", "z": "cute"}
    assert library_option("x=cute, z=cublas") == {"x": "cute", "z": "cublas"}
    assert library_option({"y": "cublas"}) == {"y": "cublas"}
    _, lib = resolve_settings(255, {"library": "cute"})
    assert lib == {"x": "cute", "y": "cute", "z": "cute"}
    _, lib = resolve_settings(255, {"library": "y=cute"})
    assert lib["y"] == "cute"
    for bad in ("q=cute", "magma", "x=cute,y"):
        with pytest.raises(ComposerError):
            resolve_settings(255, {"library": bad})
