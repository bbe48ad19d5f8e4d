"""What a path's launch plan gains from concurrency, measured on the device (``composer graph --measure``).

Why these figures: fusion trades kernels that could overlap for fewer bytes, and the paper could
only infer the overlap it gives up from kernel spans. Here every figure comes from one process,
with the same bound launches (``Path.bind``), in interleaved repetitions:

- ``node_ms``: each kernel's time in the serial plan (``max_streams = 1``: the program order),
  from events around it on the main stream — without contention, and with the cache state a
  call leaves it (a kernel timed in isolation instead would read its inputs cold from DRAM where
  the call hands them over in L2, and pay its launch latency unhidden: at p = 63 FUSED_TC16's two
  kernels timed alone summed to 6 % more than the call);
- ``serial_sum``: the sum of those; ``critical_path_ms``: the longest chain of the hazard DAG with
  those times — the call's time if concurrent kernels never slowed each other (a lower bound);
- ``serial_call_ms``: the serial plan timed as one call; ``launch_gaps_ms`` = serial call − serial
  sum (the idle time between back-to-back kernels);
- ``measured_ms``: the path's own plan timed as one call; ``overlap_ms`` = serial call − measured
  (``overlap_pct`` of the serial call) — what running kernels concurrently bought, both timings
  paying their launch gaps;
- ``spans``: start and end of each kernel inside the planned call (events around each kernel on
  its own stream, relative to the call's start);
- ``predicted_ms``: the contention estimate (``composer.sched.contention``: concurrent kernels
  share the SMs in proportion to their resident blocks) from the node times, and its error
  against the measured call.

Expected order: critical path <= measured <= serial sum + gaps (tested on the GPU).
"""

from __future__ import annotations

import contextlib
import statistics
from dataclasses import asdict, dataclass
from typing import Any

from composer.sched.contention import contended_timeline
from composer.sched.execute import run_plan
from composer.sched.plan import critical_path, plan


@dataclass(frozen=True)
class OverlapFigures:
    """The measured overlap of one path at one order (milliseconds; see the module docstring)."""

    path: str
    order: int
    streams: int
    node_ms: dict[str, float]
    serial_sum_ms: float
    critical_path: tuple[str, ...]
    critical_path_ms: float
    serial_call_ms: float
    launch_gaps_ms: float
    measured_ms: float
    overlap_ms: float
    overlap_pct: float
    spans: dict[str, tuple[float, float]]
    predicted_ms: float
    prediction_error_pct: float
    repeats: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _median_ms(pairs: list[tuple[Any, Any]]) -> float:
    return statistics.median(start.elapsed_ms(end) for start, end in pairs)


def measure_overlap(path: Any, repeats: int = 20, warmup: int = 3, event: Any = None) -> OverlapFigures:
    """Time ``path`` (a constructed ``composer.paths.base.Path``) as described in the module docstring.

    The timings (kernels in the serial plan, the serial call, the planned call, the planned call's
    spans) alternate within each repetition, so clock drift under the power cap affects them
    alike; medians over ``repeats``. ``event(device)`` makes a timing event (default: the runtime's).
    """
    if event is None:
        from composer.runtime import Event as event

    pb = path.problem
    main, device = pb.stream, pb.device
    launches = path.bind(pb.ptr("q"), pb.dqdt.ptr)
    serial = plan(path.plan.graph, 1)
    names = list(serial.issue_order)
    made: list[Any] = []  # every event, closed however the measurement ends

    def new() -> tuple[Any, Any]:
        pair = (event(device), event(device))
        made.extend(pair)
        return pair

    node_events = {n: [new() for _ in range(repeats)] for n in names}
    serial_events = [new() for _ in range(repeats)]
    call_events = [new() for _ in range(repeats)]
    spanned_call_events = [new() for _ in range(repeats)]
    span_events = {n: [new() for _ in range(repeats)] for n in names}

    def spanned(pairs: dict[str, list[tuple[Any, Any]]], r: int) -> dict[str, Any]:
        def wrap(name: str) -> Any:
            start, end = pairs[name][r]
            return lambda s: (start.record(s), launches[name](s), end.record(s))
        return {n: wrap(n) for n in names}

    def timed(events: list[tuple[Any, Any]], r: int, call: Any) -> None:
        start, end = events[r]
        start.record(main)
        call()
        end.record(main)

    # a path that replays its plan as a captured graph (``capture_plan``: a chunked fused table's many small
    # launches) has its serial call captured too, so that the two calls differ in their concurrency only,
    # not in the host's issue of some hundred launches
    serial_graph = None
    if getattr(path, "capture_plan", False):
        from composer.runtime.graph import CudaGraph

        serial_graph = CudaGraph.capture(lambda _s: run_plan(serial, path.streams, {}, launches), main)

    def serial_call() -> None:
        if serial_graph is not None:
            serial_graph.replay(main)
        else:
            run_plan(serial, path.streams, {}, launches)

    try:
        main.synchronize()
        for _ in range(warmup):
            serial_call()
            path.launch(pb.ptr("q"), pb.dqdt.ptr)
        # No synchronization until the end: the host enqueues ahead of the device, so no timing starts
        # on an idle device and pays the host's launch time (an event recorded on an idle stream stamps
        # before the kernel has even been launched; H200 call 2 saw 38 us per call that way).
        for r in range(repeats):
            # kernel by kernel in program order, then the serial call, the planned call, the planned call
            # with its kernels' spans: one repetition of each, so clock drift touches all alike
            run_plan(serial, path.streams, {}, spanned(node_events, r))
            timed(serial_events, r, serial_call)
            timed(call_events, r, lambda: path.launch(pb.ptr("q"), pb.dqdt.ptr))
            timed(spanned_call_events, r,
                  lambda: run_plan(path.plan, path.streams, path.events, spanned(span_events, r)))
        main.synchronize()
        node_ms = {n: _median_ms(node_events[n]) for n in names}
        serial_sum = sum(node_ms.values())
        crit = critical_path(path.plan.graph, node_ms)
        crit_ms = sum(node_ms[n] for n in crit)
        serial_call = _median_ms(serial_events)
        measured = _median_ms(call_events)
        origin = [spanned_call_events[r][0] for r in range(repeats)]
        spans = {n: (statistics.median(origin[r].elapsed_ms(span_events[n][r][0]) for r in range(repeats)),
                     statistics.median(origin[r].elapsed_ms(span_events[n][r][1]) for r in range(repeats)))
                 for n in names}
        predicted = contention_estimate(path, node_ms)
        figures = OverlapFigures(
            path=path.name, order=pb.order, streams=path.plan.streams, node_ms=node_ms, serial_sum_ms=serial_sum,
            critical_path=tuple(crit), critical_path_ms=crit_ms, serial_call_ms=serial_call,
            launch_gaps_ms=serial_call - serial_sum, measured_ms=measured, overlap_ms=serial_call - measured,
            overlap_pct=100.0 * (serial_call - measured) / serial_call if serial_call else 0.0, spans=spans,
            predicted_ms=predicted, prediction_error_pct=100.0 * (predicted - measured) / measured if measured else 0.0,
            repeats=repeats)
    except BaseException:  # a failed launch mid-way: release the events, keep the launch's error
        for e in made:
            with contextlib.suppress(Exception):
                e.close()
        if serial_graph is not None:
            with contextlib.suppress(Exception):
                serial_graph.close()
        raise
    for e in made:
        e.close()
    if serial_graph is not None:
        serial_graph.close()
    return figures


def contention_estimate(path: Any, node_ms: dict[str, float]) -> float:
    """The planned call's time predicted from the kernels' times alone: SM sharing by resident blocks
    (a kernel whose grid is unknown, a library GEMM, is taken to fill the machine), plus nothing for
    launch gaps."""
    sm_count = path.problem.device.sm_count
    resident = path.resident_blocks()
    grids = path.launch_blocks()
    blocks = {}
    per_sm = {}
    for name in path.plan.issue_order:
        node = path.plan.node(name)
        per_sm[name] = max(1, resident.get(name, 1))
        size = grids.get(name, node.blocks)
        blocks[name] = size if size is not None else sm_count * per_sm[name]
    return contended_timeline(path.plan, node_ms, sm_count, blocks, per_sm).call_time
