"""The dependency-graph scheduler: a path's kernels as a DAG that drives the launches.

A path declares its kernels with the arrays each reads and writes (:class:`KernelNode`);
:func:`build_graph` derives the hazard DAG, :func:`plan` turns it into launches on streams (an
event only where a cross-stream edge is not already implied), :func:`run_plan` issues them (also
under graph capture), :func:`simulate` checks a plan under arbitrary kernel durations,
:func:`contended_timeline` estimates a call's time when concurrent kernels share the SMs (the
concurrency that fusion gives up, paper §3.5–3.6 and S3.3), and :func:`describe`/:func:`to_dot`
show the result. Everything here runs without a GPU.
"""

from composer.sched.contention import contended_timeline, demand
from composer.sched.execute import run_plan
from composer.sched.graph import DataFlowError, KernelNode, build_graph, check_acyclic, program_order
from composer.sched.plan import MAIN, Launch, LaunchPlan, Record, Wait, critical_path, plan, transitive_reduction
from composer.sched.report import describe, to_dot, to_json
from composer.sched.simulate import Timeline, hazard_violations, launch_dependencies, simulate

__all__ = [
    "MAIN", "DataFlowError", "KernelNode", "Launch", "LaunchPlan", "Record", "Timeline", "Wait", "build_graph",
    "check_acyclic", "contended_timeline", "critical_path", "demand", "describe", "hazard_violations",
    "launch_dependencies", "plan", "program_order", "run_plan", "simulate", "to_dot", "to_json",
    "transitive_reduction",
]
