"""The interface every implementation path implements, with the metadata each path declares.

A path turns the device-resident stage value ``q`` into ``dqdt`` by enqueueing kernels on
the problem's main stream, so that one driver can time, step and graph-capture every path the
same way. A path does not write streams or events: it declares its kernels (``program``: the
named arrays each reads and writes, its launch shape and a cost hint) and binds their launches to
a call's buffers (``bind``); ``composer.sched`` derives the dependency graph from the arrays and
the launch plan from the graph (side streams forked from the main stream and joined back).

Besides ``launch``, a path class states what the rest of the project asks about it without
instantiating it: the orders it implements, its capabilities (``CAPABILITIES``: what
``composer build`` compiles for it, whether it reads the build's MMA shape, its lowest
architecture, ...), the options it reads (``options``) and the device memory it needs
(``memory_estimate``). ``composer.paths.registry`` lists the path classes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path as FsPath
from types import MappingProxyType
from typing import Any, ClassVar

from composer import counts
from composer.arch.machines import Machine, load_machines
from composer.arch.mma import arch_number
from composer.errors import ComposerError
from composer.sched.node_times import measured_weights
from composer.paths.problem import DeviceProblem
from composer.paths.program import PROBLEM_INPUTS
from composer.runtime import Event, Stream
from composer.runtime.graph import CudaGraph, is_capturing
from composer.runtime.stream import highest_priority
from composer.sched import KernelNode, LaunchPlan, build_graph, plan, run_plan

#: A launch callable of a bound call: enqueues one kernel on the stream the plan gives it.
Launcher = Callable[[Stream], None]

#: The path families: "library" runs the volume GEMMs through a GEMM library (or our CuTe GEMM)
#: around the support kernels, "fused" the element-local kernels of a ``[paths.FUSED*]`` schedule
#: table, "baseline" the operator as a plain CuPy program.
FAMILIES = ("library", "fused", "baseline")
#: What ``composer build`` compiles for a path (``build_kinds``): the CuTe DSL GEMMs, the CuTe DSL
#: GEMMs with epilogue trees (GEMM_FUSED's carrier and fold), the NVRTC support kernels of the
#: library paths, the kernels of a fused schedule table.
BUILD_KINDS = ("cute", "cute_tree", "support", "fused")
#: The class attributes ``registry.paths_with`` selects on.
CAPABILITIES = ("family", "build_kinds", "needs_build", "reads_mma", "min_sm", "supports_graph")


@dataclass(frozen=True)
class PathOption:
    """One option a path reads. ``parse`` turns a given value (a Python object from the API, or
    the string ``--option PATH.KEY=VALUE`` gives) into the value the path uses, raising
    ValueError/TypeError/ComposerError for one it cannot use; ``doc`` says what the option does."""

    parse: Callable[[Any], Any]
    doc: str


def positive_int_option(value: int | str) -> int:
    """A positive integer given as an option (an int, or its decimal string)."""
    number = int(value)
    if number < 1:
        raise ValueError(f"expected a positive integer, got {value!r}")
    return number


def node_times_option(value: Mapping[str, Any] | str) -> dict[str, float]:
    """Measured kernel times in microseconds by node name, as a mapping or ``"name:us,name:us"``
    (what ``composer graph --measure`` reports as ``node_ms``, times 1000); ``"hints"`` (an empty
    mapping) plans from the roofline hints even where ``schedules/node_times.toml`` has times."""
    if isinstance(value, str) and value.strip().lower() == "hints":
        return {}
    if isinstance(value, str):
        pairs = [item.split(":", 1) for item in value.split(",") if item.strip()]
        if any(len(p) != 2 for p in pairs):
            raise ValueError(f"expected name:microseconds[,name:microseconds...], got {value!r}")
        value = {name.strip(): us for name, us in pairs}
    if not isinstance(value, Mapping) or not value:
        raise TypeError(f"expected a mapping of node name to microseconds, got {value!r}")
    times = {str(name): float(us) for name, us in value.items()}
    bad = [name for name, us in times.items() if not us >= 0.0]
    if bad:
        raise ValueError(f"node times must be non-negative numbers: {', '.join(bad)}")
    return times


#: Options every path reads: how its launch plan is built.
SCHEDULE_OPTIONS: Mapping[str, PathOption] = MappingProxyType({
    "max_streams": PathOption(positive_int_option, "streams the launch plan may use, the main stream "
                                                   "included (1: the serial program order; default: no cap)"),
    "node_us": PathOption(node_times_option, "measured kernel times (µs) by node name, name:us,..., the plan's "
                                             "weights (which chain is critical, hence what runs on the main "
                                             "stream); 'hints': the roofline cost hints; default: the times "
                                             "of schedules/node_times.toml where they name the path's "
                                             "kernels, else the hints"),
})


#: Captured plans a path keeps (``Path.capture_plan``), one per (q, dqdt) pointer pair, least recently used
#: evicted: an SSP-RK3 step calls the tendency on three q buffers; a caller cycling through more would
#: otherwise grow the cache (and the device memory its graphs hold) without bound.
MAX_PLAN_GRAPHS = 8


def cost_machine(arch: str, sm_count: int, memory_bytes: int = 0) -> Machine:
    """The machine-table entry whose capacities price a device's kernels for the cost hints and
    whose recorded node times (``schedules/node_times.toml``) the plans take: the entry the GPU is
    (``composer.arch.identify``: architecture, SM count and memory; the H100 and the H200 share
    sm_90 and 132 SMs and differ only in memory); else, among the entries of the same architecture
    and SM count, or failing those of the same architecture (a green context of fewer SMs), or
    failing those all entries, the one closest in memory (the first without a memory size). Only
    the identified entry is a statement about the GPU: ``composer graph --record-times`` files
    times under it alone."""
    from composer.arch.identify import identify_machine

    table = load_machines()
    if memory_bytes > 0:
        found = identify_machine(arch, sm_count, memory_bytes, table)
        if found is not None:
            return found
    machines = list(table.values())
    same_arch = [m for m in machines if m.arch == arch]
    exact = [m for m in same_arch if m.sm_count == sm_count]
    candidates = exact or same_arch or machines
    if memory_bytes > 0:
        return min(candidates, key=lambda m: abs(m.memory_bytes - memory_bytes))
    return candidates[0]


def directory_option(value: str | FsPath) -> FsPath:
    """A directory given as an option (a string or a path)."""
    if not isinstance(value, (str, FsPath)) or not str(value):
        raise TypeError(f"expected a directory, got {value!r}")
    return FsPath(value)


class Path(ABC):
    """One implementation of the tendency on the device."""

    name: ClassVar[str]
    #: Orders this path implements; ``None`` means every order.
    orders: ClassVar[frozenset[int] | None] = None
    family: ClassVar[str]  # one of FAMILIES
    #: What ``composer build`` compiles for this path (a subset of BUILD_KINDS; empty: nothing).
    build_kinds: ClassVar[frozenset[str]] = frozenset()
    #: Runs only from a ``composer build`` directory (no kernel of it is compiled at run time).
    needs_build: ClassVar[bool] = False
    #: Its kernels use the MMA shape ``composer build --mma`` names (others take theirs from the
    #: schedule or use none), so only this path makes the build check that shape against the arch.
    reads_mma: ClassVar[bool] = False
    #: Lowest SM architecture that runs it (``None``: no floor beyond the runtime's).
    min_sm: ClassVar[int | None] = None
    #: Whether a tendency call can be captured into a CUDA graph.
    supports_graph: ClassVar[bool] = True
    #: The options the path reads, by key; any other key is refused (``parse_options``).
    options: ClassVar[Mapping[str, PathOption]] = MappingProxyType({})
    #: Which compiler produced the kernels this instance runs, where a path can get them from more
    #: than one (the fused paths: NVRTC on this machine, or the CUBINs of a `composer build`
    #: directory compiled elsewhere with another NVRTC). Recorded with every bench run: the same
    #: source compiled by NVRTC 13.0 and 13.5 runs at different speeds (session 18).
    kernel_origin: str | None = None

    def __init__(self, problem: DeviceProblem, **options: Any) -> None:
        self.check_order(problem.order)
        self.problem = problem
        self.options = self.parse_options(options)

    @classmethod
    def check_order(cls, order: int) -> None:
        if cls.orders is not None and order not in cls.orders:
            raise ComposerError(
                f"path {cls.name} does not implement order {order}; it supports {sorted(cls.orders)}"
            )

    @classmethod
    def check_arch(cls, arch: str) -> None:
        """Clear error for an architecture below the path's ``min_sm``."""
        if cls.min_sm is not None and arch_number(arch) < cls.min_sm:
            raise ComposerError(f"path {cls.name} needs sm_{cls.min_sm} or newer; {arch} cannot run it")

    @classmethod
    def parse_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """The options parsed by their declarations; a key the path does not read is an error
        (it would be silently ignored), naming the keys it does read. ``None`` means "not given"."""
        declared = cls.declared_options()
        unknown = sorted(set(options) - set(declared))
        if unknown:
            known = ", ".join(sorted(declared)) or "none"
            raise ComposerError(f"path {cls.name} has no option {', '.join(map(repr, unknown))}; "
                                f"its options: {known}")
        parsed = {}
        for key, value in options.items():
            try:
                parsed[key] = None if value is None else declared[key].parse(value)
            except (TypeError, ValueError) as exc:
                raise ComposerError(f"path {cls.name} option {key}={value!r}: {exc}") from None
        return parsed

    @classmethod
    def declared_options(cls) -> dict[str, PathOption]:
        """Every option the path reads: its own and the scheduler's."""
        return {**SCHEDULE_OPTIONS, **cls.options}

    @classmethod
    def workspace_items(cls, order: int, grid: counts.Grid,
                        options: Mapping[str, Any] | None = None) -> tuple[counts.MemoryItem, ...]:
        """The device arrays the path allocates beyond the problem's (``counts.problem_memory_items``)
        when built with ``options`` (parsed; ``None``: the schedule's settings), which can change them
        (GEMM's parity matrices, GEMM_FUSED's carrier and formed fluxes, a fused table's D operand)."""
        return ()

    @classmethod
    def memory_estimate(cls, order: int, grid: int | tuple[int, int, int],
                        options: Mapping[str, Any] | None = None) -> counts.MemoryEstimate:
        """Itemized device memory of a benchmark run of this path built with ``options`` (as the
        path takes them: checked and parsed here, an unknown key a ComposerError): the problem's
        arrays and the path's workspace (allocator padding and library workspaces not included)."""
        grid = counts.as_grid(grid)
        parsed = cls.parse_options(options or {})
        return counts.MemoryEstimate(cls.name, order, grid,
                                     counts.problem_memory_items(order, grid) + cls.workspace_items(order, grid, parsed))

    @classmethod
    def device_bytes(cls, order: int, grid: int | tuple[int, int, int],
                     options: Mapping[str, Any] | None = None) -> int:
        """Total device bytes of ``memory_estimate``."""
        return cls.memory_estimate(order, grid, options).total_bytes

    @classmethod
    @abstractmethod
    def program(cls, order: int, num_elements: int, machine: Machine, **options: Any) -> list[KernelNode]:
        """The path's kernels in program order, planning-only (no launch callables): names, roles,
        the named arrays each reads and writes (``composer.paths.program``), launch shapes and cost
        hints priced on ``machine``. Needs no GPU: ``composer graph`` plans from it on any machine,
        and an instance plans its launches from the same declaration."""

    @classmethod
    def plan_settings(cls, order: int, **options: Any) -> str:
        """What, besides the order, decides which kernels the path launches and how long each
        takes (``""``: nothing): recorded node times apply only to the same settings
        (``composer.sched.node_times``). Paths with a library assignment, MMA shape or carrier
        override it."""
        return ""

    @classmethod
    def launch_plan(cls, order: int, num_elements: int, machine: Machine, **options: Any) -> LaunchPlan:
        """The launch plan of one tendency call (``options`` already parsed; ``max_streams`` among them).

        Weights: ``node_us`` "hints" ({}): the roofline hints; else the recorded node times of this
        machine, path, order and settings where they exist, with ``node_us``'s times laid over them
        (the hints fill any node neither names)."""
        options = dict(options)
        max_streams = options.pop("max_streams", None)
        node_us = options.pop("node_us", None)
        nodes = cls.program(order, num_elements, machine, **options)
        names = [n.name for n in nodes]
        weights: dict[str, float] | None = None
        if node_us != {}:  # "hints" skips the recorded times (and so a user file that does not load)
            weights = measured_weights(machine.name, cls.name, order, names, cls.plan_settings(order, **options))
        if node_us:
            unknown = sorted(set(node_us) - set(names))
            if unknown:
                raise ComposerError(f"{cls.name} p={order}: node_us names no kernel of the path: {', '.join(unknown)} "
                                    f"(its kernels: {', '.join(names)})")
            weights = {**(weights or {}), **{name: us * 1e-6 for name, us in node_us.items()}}
        return plan(build_graph(nodes, PROBLEM_INPUTS), max_streams or len(nodes), weights)

    def schedule(self) -> None:
        """Plan this instance's launches and create the side streams and events the plan uses.
        Subclasses call it at the end of ``__init__``, once their kernels are loaded."""
        pb = self.problem
        machine = cost_machine(pb.device.arch, pb.device.sm_count, getattr(pb.device, "total_memory", 0))
        self.plan = self.launch_plan(pb.order, pb.num_elements, machine, **self.options)
        # confined kernels (sm_limit) run on the plan's priority streams, at the highest priority
        top = highest_priority(pb.device) if self.plan.priority_streams else 0
        self.side_streams = [Stream(pb.device, priority=top if s in self.plan.priority_streams else 0)
                             for s in range(1, self.plan.streams)]
        # synchronization only: the fork and done events are never timed
        self.events = {name: Event(pb.device, timing=False) for name in self.plan.events}

    @property
    def streams(self) -> list[Stream]:
        """The plan's streams: the problem's main stream first, then the side streams."""
        return [self.problem.stream, *self.side_streams]

    def resident_blocks(self) -> dict[str, int]:
        """Blocks per SM each kernel holds at its launch shape, by node name, where the path knows
        its kernels (library GEMMs: not known; the contention estimate takes them to fill the SMs)."""
        return {}

    def diagnostics(self) -> dict[str, Any]:
        """What the instance's kernels counted on the device that a figure needs beside it (waits for
        the device); {} where a path counts nothing (the overlapped flux: ``LibraryPath``)."""
        return {}

    def launch_blocks(self) -> dict[str, int]:
        """Blocks in each kernel's launch grid as this instance launches it, where the declaration
        (``program``) could not know it; by node name."""
        return {}

    @abstractmethod
    def bind(self, q_ptr: int, dqdt_ptr: int) -> Mapping[str, Launcher]:
        """Each kernel's launch for one call that reads ``q_ptr`` and writes ``dqdt_ptr``, by node name."""

    #: Whether ``launch`` replays the plan as a CUDA graph (captured once per pair of q and dqdt
    #: pointers) instead of issuing its launches one by one. Why: a plan of many small launches (a
    #: chunked fused table: two per chunk, and the events between its lanes) costs more host time to
    #: issue through cuda-python, some 20 us per launch, than the GPU takes to run it (session 28: a
    #: p = 31 table in 64 chunks ran 6.5 ms a call issued eagerly against 0.6 ms in one launch each).
    capture_plan: bool = False

    def launch(self, q_ptr: int, dqdt_ptr: int) -> None:
        """Enqueue one tendency evaluation ``dqdt = L(q)`` on ``problem.stream``: the plan's steps,
        forking to its side streams and joining back, so the call is complete when the main stream is.
        With ``capture_plan`` the steps are captured into a CUDA graph on the first call with these
        pointers and replayed from then on; inside a capture already under way (``composer bench
        --graph`` captures whole stages) they are issued into it as they are."""
        if self.capture_plan and not is_capturing(self.problem.stream):
            graphs: dict[tuple[int, int], CudaGraph] = self.__dict__.setdefault("_plan_graphs", {})
            key = (int(q_ptr), int(dqdt_ptr))
            if key in graphs:
                graphs[key] = graphs.pop(key)  # the most recently used last
            else:
                if len(graphs) >= MAX_PLAN_GRAPHS:  # the least recently used pair goes
                    graphs.pop(next(iter(graphs))).close()
                launchers = self.bind(q_ptr, dqdt_ptr)
                graphs[key] = CudaGraph.capture(lambda _s: run_plan(self.plan, self.streams, self.events, launchers),
                                                self.problem.stream)
            graphs[key].replay(self.problem.stream)
            return
        run_plan(self.plan, self.streams, self.events, self.bind(q_ptr, dqdt_ptr))

    def release_plan_graphs(self) -> None:
        """Destroy the captured plans (``capture_plan``); a later call captures again."""
        for graph in self.__dict__.pop("_plan_graphs", {}).values():
            graph.close()

    def close(self) -> None:
        """Release the path's own resources (handles, streams, workspace); subclasses call it last."""
        self.release_plan_graphs()
        for stream in getattr(self, "side_streams", ()):
            stream.close()
        for event in getattr(self, "events", {}).values():
            event.close()
        self.side_streams, self.events = [], {}
