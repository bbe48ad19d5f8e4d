"""The campaign's plan: the whole study as steps, each one existing ``composer`` command.

Axes (``--axes``; ``all`` = every axis this installation can run):

- ``carrier``: ``composer sweep-carrier`` at every order GEMM_FUSED runs, before that order's
  benches: every built carrier x fold x flux setting validated and timed on this GPU, the winner
  written into the user schedules directory, so that every later GEMM_FUSED run of the campaign is
  this machine's best (the shipped choice is the H200's). The sweep writes into a copy of the
  order's whole schedule there, which from then on stands for that order in place of the shipped
  file (later shipped changes to it need the copy removed or merged);
- ``paths``: every path at every order in one interleaved sweep per order (the landscape and the
  crossover ratios; paired within the run). The one-axis ablations whose two sides are paths as
  scheduled (fused MMA shape FUSED_TC/FUSED_TC16, fusion GEMM_FUSED/GEMM_CUTE, instruction
  FUSED_DFMA/FUSED_TC) are pairs of this sweep;
- ``mma``: GEMM_CUTE with all three GEMMs on CuTe at 8x8x4 and at 16x8x4, each against GEMM;
- ``library``: GEMM_CUTE all on CuTe (16x8x4) against cuBLAS GEMM (the 16x8x4 sweep of ``mma``);
- ``fusion`` / ``instruction``: their pair alone, when ``paths`` is not run;
- ``profiles``: ``composer profile`` of every path at every order (Nsight Compute; needs ncu);
- ``overlap``: ``composer graph --measure --record-times`` of every path at every order (the
  scheduler's figures; the node times go into the user schedules directory's ``node_times.toml``,
  the launch plans' weights on this GPU from then on);
- ``balance``: the paths on fewer SMs (``composer bench --sms N``) at p = 63, 255, 511 — only when
  this composer's bench has ``--sms`` (detected on its parser).

Sizes: each order's schedule (Table S29 grids and step counts); rounds as the paper: 6 at
p <= 511, 3 above. A (path, order) that does not implement the order, does not fit the machine's
memory, or needs a ``composer build`` directory that is not there is left out with a note. Steps
are ordered so that a budget cut keeps the most useful part: the landscape first, then the
ablations, the overlap, the profiles, the balance axis.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from composer import counts
from composer.arch.machines import Machine
from composer.errors import ComposerError

AXES = ("carrier", "paths", "mma", "library", "fusion", "instruction", "profiles", "overlap", "balance")
#: Paper §4.2: six interleaved rounds at p <= 511, three above.
ROUNDS_LOW, ROUNDS_HIGH, ROUNDS_SPLIT = 6, 3, 511
#: Orders of the balance axis (paper §8: p = 63, 255, 511).
BALANCE_ORDERS = (63, 255, 511)
#: Shares of the machine's SMs on the balance axis (paper §8: 75, 50, 40, 25 %).
BALANCE_FRACTIONS = (0.75, 0.5, 0.4, 0.25)
GRAPH_REPEATS = 10
CARRIER_ROUNDS = 5  # interleaved rounds of a carrier sweep (sweep-carrier's default)
ALL_CUTE = {"library": "cute"}


@dataclass(frozen=True)
class Step:
    """One command of the campaign; ``out`` is relative to the campaign directory."""

    id: str
    axis: str
    kind: str  # "bench", "profile", "graph" or "carrier"
    order: int
    paths: tuple[str, ...]
    out: str
    rounds: int = 0
    options: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()  # per path: sorted (key, value)
    sms: int | None = None
    what: str = ""

    def path_options(self) -> dict[str, dict[str, str]]:
        return {path: dict(values) for path, values in self.options}

    def argv(self, root: Path) -> list[str]:
        """The ``composer`` command line of the step, the campaign directory being ``root``."""
        out = str(Path(root) / self.out)
        opts = [f"--option={p}.{k}={v}" for p, values in self.options for k, v in values]
        paths = ",".join(self.paths)
        if self.kind == "bench":
            return ["bench", "--paths", paths, "--orders", str(self.order), "--rounds", str(self.rounds), "--out", out,
                    *opts, *(["--sms", str(self.sms)] if self.sms else [])]
        if self.kind == "profile":
            return ["profile", "--paths", paths, "--orders", str(self.order), "--out", out, *opts]
        if self.kind == "graph":
            return ["graph", "--path", paths, "--order", str(self.order), "--measure", "--repeats",
                    str(GRAPH_REPEATS), "--record-times", "--out", out]
        if self.kind == "carrier":
            return ["sweep-carrier", "--order", str(self.order), "--rounds", str(self.rounds), "--out", out]
        raise ValueError(f"unknown step kind {self.kind!r}")


@dataclass
class Plan:
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what is left out, and why

    def step(self, step_id: str) -> Step:
        return next(s for s in self.steps if s.id == step_id)


@dataclass(frozen=True)
class Capabilities:
    """What this installation and machine can run (detected by ``detect_capabilities``; tests give their own)."""

    paths: tuple[str, ...]  # registered paths the campaign runs (the CuPy baseline left out)
    build_dir: Path | None  # a `composer build` directory with a manifest, or None
    ncu: bool  # Nsight Compute found
    bench_sms: bool  # `composer bench --sms` exists


def bench_has_sms() -> bool:
    """Whether ``composer bench`` takes ``--sms`` (the balance axis), read from its parser."""
    import argparse

    from composer.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    return "--sms" in sub.choices["bench"]._option_string_actions  # noqa: SLF001


def detect_capabilities(machine: Machine) -> Capabilities:
    from composer.paths.registry import PATHS
    from composer.runtime.manifest import requested_build_dir

    build = requested_build_dir() or Path("build") / machine.arch
    try:
        from composer.profile.ncu import find_ncu

        find_ncu()
        ncu = True
    except ComposerError:
        ncu = False
    return Capabilities(paths=tuple(c.name for c in PATHS if c.family != "baseline"),
                        build_dir=build if (build / "manifest.json").is_file() else None, ncu=ncu,
                        bench_sms=bench_has_sms())


def rounds_for(order: int, rounds: int | None = None) -> int:
    if rounds is not None:
        return rounds
    return ROUNDS_LOW if order <= ROUNDS_SPLIT else ROUNDS_HIGH


def default_sm_counts(machine: Machine) -> list[int]:
    """Even SM counts nearest the BALANCE_FRACTIONS of the machine (ties to the smaller)."""
    out = []
    for share in BALANCE_FRACTIONS:
        target = share * machine.sm_count
        low = int(target) // 2 * 2
        out.append(low if target - low <= low + 2 - target else low + 2)
    return sorted(set(out), reverse=True)


def parse_axes(text: str) -> tuple[str, ...]:
    names = [t.strip() for t in text.replace(",", " ").split() if t.strip()]
    if names == ["all"]:
        return AXES
    unknown = sorted(set(names) - set(AXES))
    if unknown or not names:
        raise ComposerError(f"unknown axes {unknown or names}; choose all or some of {', '.join(AXES)}")
    return tuple(a for a in AXES if a in names)


def _frozen(options: dict[str, dict[str, str]]) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    return tuple((p, tuple(sorted(v.items()))) for p, v in sorted(options.items()) if v)


def runnable(paths: Iterable[str], order: int, machine: Machine, caps: Capabilities, grid: counts.Grid,
             notes: list[str]) -> list[str]:
    """The ``paths`` that can run at ``order`` here, with a note for each one that cannot."""
    from composer.paths.registry import path_class

    out = []
    for name in paths:
        cls = path_class(name)
        try:
            cls.check_order(order)
        except ComposerError:
            continue  # the path does not implement the order: nothing to note
        if cls.needs_build and caps.build_dir is None:
            note = f"{cls.name}: needs a `composer build --arch {machine.arch}` directory ($COMPOSER_BUILD_DIR or " \
                   f"build/{machine.arch}); left out"
            if note not in notes:
                notes.append(note)
            continue
        if not counts.fits(order, grid, cls.name, machine):
            need = counts.device_memory_estimate(order, grid, cls.name).total_bytes / 1e9
            notes.append(f"{cls.name} p={order}: needs about {need:.1f} GB, more than {machine.name} has; left out")
            continue
        out.append(cls.name)
    return out


def build_plan(orders: Sequence[int], axes: Sequence[str], machine: Machine, caps: Capabilities, *,
               paths: Sequence[str] | None = None, rounds: int | None = None,
               sm_counts: Sequence[int] | None = None, grid_of=None) -> Plan:
    """The steps of the campaign (module docstring). ``grid_of(order)`` gives the benchmark grid
    (default: the order's schedule)."""
    if grid_of is None:
        from composer.config.schedules import load_schedule

        grid_of = lambda order: load_schedule(order).benchmark.grid  # noqa: E731
    plan = Plan()
    wanted = [p for p in (paths or caps.paths)]
    axes = tuple(axes)
    if "balance" in axes and not caps.bench_sms:
        plan.notes.append("balance: this composer's bench has no --sms (green contexts); axis left out")
    if "profiles" in axes and not caps.ncu:
        plan.notes.append("profiles: Nsight Compute (ncu) not found; axis left out")
    bench_steps: list[Step] = []
    later: dict[str, list[Step]] = {"overlap": [], "profiles": [], "balance": []}
    for order in sorted(orders):
        grid = grid_of(order)
        here = runnable(wanted, order, machine, caps, grid, plan.notes)
        if not here:
            plan.notes.append(f"p={order}: no path can run; order left out")
            continue
        r = rounds_for(order, rounds)
        tag = f"p{order:04d}"
        if "carrier" in axes and "GEMM_FUSED" in here:
            bench_steps.append(Step(f"carrier/{tag}", "carrier", "carrier", order, ("GEMM_FUSED",),
                                    f"carrier/{tag}.json", CARRIER_ROUNDS,
                                    what="GEMM_FUSED's carrier, fold and flux chosen on this GPU (sweep-carrier)"))
        if "paths" in axes:
            bench_steps.append(Step(f"paths/{tag}", "paths", "bench", order, tuple(here), f"bench/paths/{tag}", r,
                                    what="every path (landscape, crossover ratios, paired ablations)"))
        pairs = {"fusion": ("GEMM_CUTE", "GEMM_FUSED"), "instruction": ("FUSED_TC", "FUSED_DFMA")}
        for axis, pair in pairs.items():
            if axis in axes and "paths" not in axes and all(p in here for p in pair):
                bench_steps.append(Step(f"{axis}/{tag}", axis, "bench", order, pair, f"bench/{axis}/{tag}", r,
                                        what=f"{pair[1]} against {pair[0]}"))
        if "GEMM_CUTE" in here and "GEMM" in here:
            shapes = (["8x8x4", "16x8x4"] if "mma" in axes else []) + (["16x8x4"] if "library" in axes else [])
            for shape in dict.fromkeys(shapes):
                options = _frozen({"GEMM_CUTE": {**ALL_CUTE, "mma": shape}})
                axis = "mma" if "mma" in axes else "library"
                bench_steps.append(Step(f"cute-{shape}/{tag}", axis, "bench", order, ("GEMM", "GEMM_CUTE"),
                                        f"bench/cute-{shape}/{tag}", r, options,
                                        what=f"GEMM_CUTE all on CuTe at {shape} against cuBLAS GEMM"))
        if "overlap" in axes:
            later["overlap"].append(Step(f"overlap/{tag}", "overlap", "graph", order, tuple(here),
                                         f"graph/{tag}.json", what="scheduler overlap, node times recorded (composer graph --measure --record-times)"))
        if "profiles" in axes and caps.ncu:
            later["profiles"].append(Step(f"profiles/{tag}", "profiles", "profile", order, tuple(here), "profiles",
                                          what="Nsight Compute of one call per path"))
        if "balance" in axes and caps.bench_sms and order in BALANCE_ORDERS:
            for sms in (sm_counts or default_sm_counts(machine)):
                later["balance"].append(Step(f"balance/sms{sms:03d}/{tag}", "balance", "bench", order, tuple(here),
                                             f"bench/balance/sms{sms:03d}/{tag}", r, sms=sms,
                                             what=f"every path on {sms} of {machine.sm_count} SMs"))
    plan.steps = bench_steps + later["overlap"] + later["profiles"] + later["balance"]
    return plan


__all__ = ["AXES", "BALANCE_ORDERS", "Capabilities", "Plan", "Step", "bench_has_sms", "build_plan",
           "default_sm_counts", "detect_capabilities", "parse_axes", "rounds_for", "runnable"]
