"""composer.sched.measure on the CPU: a fake device whose streams advance virtual clocks, so the
overlap figures can be checked against durations known in advance."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from composer.sched import KernelNode, build_graph, plan
from composer.sched.measure import measure_overlap

DURATIONS = {"a": 3.0, "b": 5.0, "c": 2.0, "d": 1.0}
GAP = 0.25  # launch gap a stream pays before each kernel


@dataclass
class FakeStream:
    clock: float = 0.0

    def wait(self, event: "FakeEvent") -> None:
        self.clock = max(self.clock, event.time)

    def synchronize(self) -> None:
        pass


@dataclass
class FakeEvent:
    time: float = 0.0

    def record(self, stream: FakeStream) -> None:
        self.time = stream.clock

    def elapsed_ms(self, end: "FakeEvent") -> float:
        return end.time - self.time

    def close(self) -> None:
        pass


@dataclass
class FakeProblem:
    stream: FakeStream
    order: int = 7
    device: object = field(default_factory=lambda: type("D", (), {"sm_count": 4})())

    def ptr(self, name: str) -> int:
        return 0

    @property
    def dqdt(self) -> object:
        return type("B", (), {"ptr": 0})()


class FakePath:
    """a -> {b, c} -> d: b and c may overlap; every launch costs GAP on its stream first."""

    name = "FAKE"

    def __init__(self) -> None:
        nodes = [KernelNode("a", "r", ("q",), ("x",), grid=4), KernelNode("b", "r", ("x",), ("y",), grid=4),
                 KernelNode("c", "r", ("x",), ("z",), grid=4), KernelNode("d", "r", ("y", "z"), ("out",), grid=4)]
        self.plan = plan(build_graph(nodes, {"q"}), 4)
        self.problem = FakeProblem(FakeStream())
        self.streams = [self.problem.stream] + [FakeStream() for _ in range(self.plan.streams - 1)]
        self.events = {e: FakeEvent() for e in self.plan.events}

    def bind(self, q: int, dqdt: int) -> dict:
        def launch(name: str):
            def run(stream: FakeStream) -> None:
                stream.clock += GAP + DURATIONS[name]
            return run
        return {n: launch(n) for n in DURATIONS}

    def launch(self, q: int, dqdt: int) -> None:
        from composer.sched import run_plan
        run_plan(self.plan, self.streams, self.events, self.bind(q, dqdt))

    def resident_blocks(self) -> dict:
        return {}

    def launch_blocks(self) -> dict:
        return {}


def test_overlap_figures_from_known_durations() -> None:
    path = FakePath()
    fig = measure_overlap(path, repeats=3, warmup=1, event=lambda _device: FakeEvent())
    assert fig.node_ms == pytest.approx({n: GAP + t for n, t in DURATIONS.items()})
    assert fig.serial_sum_ms == pytest.approx(sum(DURATIONS.values()) + 4 * GAP)
    assert fig.critical_path == ("a", "b", "d")
    assert fig.critical_path_ms == pytest.approx(3 * GAP + 3.0 + 5.0 + 1.0)
    assert fig.serial_call_ms == pytest.approx(fig.serial_sum_ms)
    # b and c overlap on two streams: the call is the critical path
    assert fig.measured_ms == pytest.approx(fig.critical_path_ms)
    assert fig.overlap_ms == pytest.approx(GAP + 2.0)
    assert fig.spans["c"][0] == pytest.approx(fig.spans["b"][0])
    assert fig.spans["d"][0] == pytest.approx(fig.spans["b"][1])
    # four blocks each on four SMs at one block per SM: b and c each fill the machine, so the
    # contention estimate serializes them (its error against the ideal overlap is reported)
    assert fig.predicted_ms == pytest.approx(fig.serial_sum_ms)
    assert fig.prediction_error_pct == pytest.approx(100 * (fig.predicted_ms - fig.measured_ms) / fig.measured_ms)
