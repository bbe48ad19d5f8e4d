"""Estimate a call's time from per-kernel times when concurrent kernels share the SMs.

Why: the ideal replay (``composer.sched.simulate``) assumes unlimited SMs, so it overstates what
streams buy; the paper's model sums kernel times (§6), which assumes no overlap at all. The
concurrency lost to fusion lies between the two and depends on how much of the machine each
kernel occupies. This is a processor-sharing model of that, under these assumptions:

- Each kernel has an isolated time ``t`` (measured alone, or predicted) and a demand
  ``f = min(1, blocks / (blocks_per_sm * sm_count))``: the fraction of the SMs its resident blocks
  occupy (grid size capped by occupancy). A kernel with several waves fills the machine (f = 1).
- While the running kernels' demands sum to at most 1, they all run at full speed (small kernels
  overlap). Above 1 the SMs are shared in proportion to demand, so every running kernel
  progresses at rate ``1 / sum(f)``: the machine does the same SM-time of work per unit time, so
  two machine-filling kernels take the sum of their times, as if serialized.
- A kernel confined to part of the SMs (``KernelNode.sm_limit``) holds ``sm_limit / sm_count``
  of the machine while it runs, at full speed (its time is its time on that partition); the
  others share what is left.
- Kernels start when the plan's stream rules allow (stream order, event waits), as in the ideal
  replay. Not modelled: launch latency, the idle SMs in a kernel's last partial wave (which a
  concurrent kernel could fill: real overlap can save more) and shared L2 or DRAM bandwidth (two
  memory-bound kernels that each leave SMs free still compete: real overlap can save less).

The SM count and the occupancy are inputs (the machine's numbers live elsewhere), so the model
applies to any target.
"""

from __future__ import annotations

from collections.abc import Mapping

from composer.sched.graph import DataFlowError
from composer.sched.plan import LaunchPlan
from composer.sched.simulate import Timeline, launch_dependencies

_REL_TOL = 1e-12


def demand(blocks: int, blocks_per_sm: int, sm_count: int) -> float:
    """The fraction of the machine a kernel's resident blocks occupy."""
    if blocks < 1 or blocks_per_sm < 1 or sm_count < 1:
        raise DataFlowError(f"blocks, blocks_per_sm and sm_count must be positive, got "
                            f"{blocks}, {blocks_per_sm}, {sm_count}")
    return min(1.0, blocks / (blocks_per_sm * sm_count))


def contended_timeline(plan: LaunchPlan, times: Mapping[str, float], sm_count: int,
                       blocks: Mapping[str, int] | None = None,
                       blocks_per_sm: Mapping[str, int] | None = None) -> Timeline:
    """Start and end of each kernel of ``plan`` under SM sharing; ``call_time`` is the call's time.

    ``blocks`` defaults to each node's grid size, ``blocks_per_sm`` (resident blocks per SM, the
    occupancy) to 1.
    """
    deps, tail = launch_dependencies(plan)
    grid = dict(blocks or {})
    share: dict[str, float] = {}
    for n in deps:
        size = grid.get(n, plan.node(n).blocks)
        if size is None and plan.node(n).sm_limit is None:
            raise DataFlowError(f"node {n!r}: no grid size given for the contention estimate")
        limit = plan.node(n).sm_limit
        share[n] = (min(1.0, limit / sm_count) if limit is not None
                    else demand(size, (blocks_per_sm or {}).get(n, 1), sm_count))
    remaining = {n: float(times[n]) for n in deps}
    start: dict[str, float] = {}
    end: dict[str, float] = {}
    now = 0.0
    running: set[str] = set()
    while len(end) < len(deps):
        for n in plan.issue_order:
            if n not in start and deps[n] <= end.keys():
                start[n] = now
                running.add(n)
        reserved = min(1.0, sum(share[n] for n in running if plan.node(n).sm_limit is not None))
        others = sum(share[n] for n in running if plan.node(n).sm_limit is None)
        # the unconfined kernels share the SMs the confined ones leave (at least a sliver, so that a
        # partition of the whole machine still lets time advance)
        free = max(1.0 - reserved, 1e-9)
        rate = {n: 1.0 if plan.node(n).sm_limit is not None else min(1.0, free / max(others, free))
                for n in running}
        step = min(remaining[n] / rate[n] for n in running)
        now += step
        for n in sorted(running):
            if remaining[n] / rate[n] <= step * (1 + _REL_TOL):
                end[n] = now
                running.discard(n)
            else:
                remaining[n] -= rate[n] * step
    call_time = max((end[n] for n in tail), default=0.0)
    return Timeline(start=start, end=end, call_time=call_time)
