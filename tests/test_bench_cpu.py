"""CPU parts of the benchmark driver: the event-timer accounting and the no-GPU message."""

from __future__ import annotations

import pytest

from composer.cli.main import main


class FakeEvent:
    clock = 0.0

    def __init__(self, *_args) -> None:
        self.t = None
        self.synced = False

    def record(self, _stream):
        FakeEvent.clock += 1.0
        self.t = FakeEvent.clock
        return self

    def synchronize(self) -> None:
        self.synced = True

    def elapsed_ms(self, end: "FakeEvent") -> float:
        return end.t - self.t

    def close(self) -> None:
        pass


def test_event_timer_counts_exactly_the_timed_calls(monkeypatch) -> None:
    import composer.paths.timer as timer_module

    monkeypatch.setattr(timer_module, "Event", FakeEvent)
    timer = timer_module.EventTimer(device=None, stream=None)
    for _ in range(3):  # warm-up calls, discarded by reset
        timer.begin()
        timer.end()
    timer.reset()
    for _ in range(57):
        timer.begin()
        timer.end()
    # The last pair is read back only by flush (one call later).
    assert timer.intervals == 56
    timer.flush()
    assert timer.intervals == 57
    assert timer.total_ms == pytest.approx(57.0)


def test_seconds_per_call_times_the_calls_after_one_warm_up() -> None:
    from types import SimpleNamespace

    from composer.paths.timer import seconds_per_call

    launched: list[str] = []

    class Path:
        problem = SimpleNamespace(stream="main", ptr=lambda name: name, dqdt=SimpleNamespace(ptr="dqdt"))

        def launch(self, q, out):
            launched.append("warm-up" if start.t is None else ("timed" if end.t is None else "late"))
            FakeEvent.clock += 1000.0  # 1 s of device time per call on the fake clock

    start, end = FakeEvent(), FakeEvent()
    seconds = seconds_per_call(Path(), start, end, calls=4)
    assert launched == ["warm-up"] + ["timed"] * 4 and end.synced
    # the records tick the fake clock by 1 ms each: (4 calls x 1000 ms + 1 ms) / 4 calls
    assert seconds == pytest.approx((4 * 1000.0 + 1.0) / 1e3 / 4)


def test_bench_without_gpu_names_what_needs_one(capsys) -> None:
    from composer.runtime import gpu_available

    if gpu_available():
        pytest.skip("a GPU is present")
    assert main(["bench", "--orders", "7"]) == 2
    err = capsys.readouterr().err
    assert "needs an NVIDIA GPU" in err and "composer info" in err and "validate --backend numpy" in err


def test_bench_rejects_unknown_order(capsys) -> None:
    assert main(["bench", "--orders", "8"]) == 2
    assert "no schedule for orders [8]" in capsys.readouterr().err


def test_validate_numpy_runs(capsys) -> None:
    assert main(["validate", "--order", "3", "--grid", "2", "--dt", "1e-3", "--nstep", "3", "--json"]) == 0
    assert '"convergence_ratio"' in capsys.readouterr().out


def test_unknown_path_is_a_clear_error() -> None:
    from composer.errors import ComposerError
    from composer.paths.registry import path_class

    with pytest.raises(ComposerError, match="unknown path 'nope'"):
        path_class("nope")


def test_sweep_skips_cells_a_path_does_not_implement() -> None:
    from composer.bench.runner import unsupported_cells

    assert unsupported_cells(["GEMM", "FUSED", "FUSED_TC"], [255, 511]) == {("FUSED", 511)}


def test_bench_path_options_parse_and_group() -> None:
    import argparse

    from composer.cli.arguments import options_by_path, path_option

    assert path_option("GEMM_CUTE.mma=8x8x4") == ("GEMM_CUTE", "mma", "8x8x4")
    for bad in ("GEMM_CUTE.mma", "mma=8x8x4", ".mma=1", "GEMM_CUTE.=1", "GEMM_CUTE.mma="):
        with pytest.raises(argparse.ArgumentTypeError, match="PATH.KEY=VALUE"):
            path_option(bad)
    assert options_by_path([("A", "x", "1"), ("A", "y", "2"), ("B", "x", "3")]) == {
        "A": {"x": "1", "y": "2"}, "B": {"x": "3"}}


def test_bench_option_for_a_path_not_benchmarked_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from composer.cli.main import main

    assert main(["bench", "--paths", "GEMM", "--orders", "7", "--option", "GEMM_CUTE.mma=8x8x4"]) == 2
    assert "not requested" in capsys.readouterr().err
