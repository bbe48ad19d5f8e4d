"""The dependency-graph scheduler: a path's kernels as a DAG that drives the launches.

A path declares its kernels with the arrays each reads and writes (:class:`KernelNode`);
:func:`build_graph` derives the hazard DAG, :func:`plan` turns it into launches on streams with
the fewest events, :func:`run_plan` issues them (also under graph capture), and :func:`simulate` checks a plan
under arbitrary kernel durations. Everything here runs without a GPU.
"""

from composer.sched.execute import run_plan
from composer.sched.graph import DataFlowError, KernelNode, build_graph, check_acyclic, program_order
from composer.sched.plan import Launch, LaunchPlan, Record, Wait, critical_path, plan, transitive_reduction
from composer.sched.simulate import Timeline, hazard_violations, launch_dependencies, simulate

__all__ = [
    "DataFlowError", "KernelNode", "Launch", "LaunchPlan", "Record", "Timeline", "Wait", "build_graph",
    "check_acyclic", "critical_path", "hazard_violations", "launch_dependencies", "plan", "program_order",
    "run_plan", "simulate", "transitive_reduction",
]
