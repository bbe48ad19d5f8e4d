"""SSP-RK3 time stepping on the device, the same for every path.

State: ``problem.fields["q"]`` holds the solution and is updated in place by the last stage;
``problem.q_stage`` holds the stage value. Each stage is one tendency call (timed by an
:class:`EventTimer` when given) followed by the fused RK3 update kernel.
"""

from __future__ import annotations

from composer.dg.timeint import RK3_STAGES
from composer.kernels.support import SupportKernels, launch_rk3_stage
from composer.paths.base import Path
from composer.paths.timer import EventTimer
from composer.runtime import CudaGraph


class Stepper:
    def __init__(self, path: Path, dt: float, support: SupportKernels, timer: EventTimer | None = None) -> None:
        self.path = path
        self.problem = path.problem
        self.dt = float(dt)
        self.support = support
        self.timer = timer
        self._graphs: list[CudaGraph] | None = None

    def stage(self, index: int) -> None:
        """Enqueue RK stage ``index`` (0, 1, 2)."""
        pb = self.problem
        q, stage = pb.ptr("q"), pb.q_stage.ptr
        q_in = q if index == 0 else stage
        q_out = stage if index < 2 else q
        if self.timer:
            self.timer.begin()
        self.path.launch(q_in, pb.dqdt.ptr)
        if self.timer:
            self.timer.end()
        a, b = RK3_STAGES[index]
        launch_rk3_stage(self.support.rk3_stage, q, q_in, pb.dqdt.ptr, q_out, a, b, self.dt,
                         pb.num_elements, pb.stream)

    def step(self) -> None:
        """One SSP-RK3 step: three stages, eager launches or graph replays."""
        if self._graphs is None:
            for index in range(3):
                self.stage(index)
            return
        for graph in self._graphs:
            if self.timer:
                self.timer.begin()
            graph.replay(self.problem.stream)
            if self.timer:
                self.timer.end()

    def use_graphs(self) -> None:
        """Capture each of the three stages once into a CUDA graph and replay them from now on.

        With graphs the timed interval covers the whole stage (tendency + update), since the
        update kernel is part of the same graph.
        """
        timer, self.timer = self.timer, None
        try:
            self._graphs = [CudaGraph.capture(lambda _s, i=i: self.stage(i), self.problem.stream)
                            for i in range(3)]
        finally:
            self.timer = timer

    def close(self) -> None:
        for graph in self._graphs or []:
            graph.close()
        self._graphs = None
