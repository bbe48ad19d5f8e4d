"""A streamed kernel's panel copies as a per-thread pointer program (``copies = "pointers"``).

Why: in the shipped streamed kernels a thread re-derives the 64-bit global address of each of its
16-byte panel copies every panel from 32-bit node offsets (IMAD.WIDE, the carry of the element
base, register moves to form address pairs): about 37 integer instructions around 8 LDGSTS per
32 DMMAs in the p = 767 FUSED_TC16 hot loop (155 instructions, SASS of the shipped table), where
cuBLAS's DGEMM of the same tile issues about 3.4 instructions per DMMA in all (ncu, session 9
call 2b) against our 5.0. The copies of one thread differ from its first copy by offsets that are
the same for every thread whenever the block size is a multiple of the copy loop's fast extent; the
panels follow each other at a constant stride. This module derives those offsets from the same
index formulas as the template (``f_pair``, ``stage_d``), checks that they are thread-independent,
and hands them to the template as literal constants: per panel a thread then adds one panel offset
to three base pointers and issues its copies with immediate offsets.

The emulator (:mod:`composer.fused.emulate`) stages its panels through the same program, so the
CPU tests check the constants the CUDA is generated from against the reference mapping.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from composer.errors import ComposerError


@dataclass(frozen=True)
class CopyTrips:
    """One operand's copies per thread and panel: trip t copies pair ``tid + t * threads``, at
    ``(global, shared)`` offsets (doubles) ``deltas[t]`` from the thread's first pair; a partial last
    trip is issued only by the threads whose pair exists (``guard``)."""

    pairs: int
    threads: int
    deltas: tuple[tuple[int, int], ...]

    def guard(self, t: int) -> int | None:
        """The bound ``pairs - t * threads`` below which a thread issues trip t (None: all do)."""
        return None if (t + 1) * self.threads <= self.pairs else self.pairs - t * self.threads


def f_pair_offsets(plan, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(in-element node offset, shared-memory offset in the F panel) of F pair n at panel 0 and the
    box origin (the template's ``f_pair`` with ``node`` and ``f_off``)."""
    kp, nl, nq, fs = plan.k_panel, plan.lines(plan.dir), plan.nq, plan.fs
    _, bj, bi = plan.kernel.box
    l2 = bj if plan.dir == 0 else bi
    if plan.dir == 0:
        m, l = 2 * (n % (kp // 2)), n // (kp // 2)
        return (l // l2 * nq + l % l2) * nq + m, (m * fs + l if plan.f_lines else l * fs + m)
    m, l = n // (nl // 2), 2 * (n % (nl // 2))
    g = (l // l2 * nq + m) * nq + l % l2 if plan.dir == 1 else (m * nq + l // l2) * nq + l % l2
    return g, m * fs + l


def f_mirror_offsets(plan, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(in-element node offset of the pair mirroring F pair n at panel 0, at the box origin; the F pair's
    shared-memory offset) with parity (the template's ``f_mirror``: x's pair m, m + 1 mirrors to the pair
    at Nq - 2 - m, y's and z's lines stay paired). The mirrors move down the axis from panel to panel."""
    kp, nl, nq = plan.k_panel, plan.lines(plan.dir), plan.nq
    _, bj, bi = plan.kernel.box
    l2 = bj if plan.dir == 0 else bi
    _, s = f_pair_offsets(plan, n)
    if plan.dir == 0:
        m, l = 2 * (n % (kp // 2)) + 1, n // (kp // 2)
        return (l // l2 * nq + l % l2) * nq + nq - 1 - m, s
    m, l = n // (nl // 2), 2 * (n % (nl // 2))
    mirror = nq - 1 - m
    g = (l // l2 * nq + mirror) * nq + l % l2 if plan.dir == 1 else (mirror * nq + l // l2) * nq + l % l2
    return g, s


def d_pair_offsets(plan, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(offset in D from its row a_org, or from panel 0's row a_org in the k-panel copy; shared-memory
    offset in the D panel) of D pair n (the template's ``stage_d``). With parity pair n is of virtual row
    a: the parity rows' row a_org + a (A's half) for a < NA, else row a_org + a - NA's B half."""
    kp = plan.k_panel
    a, m = n // (kp // 2), 2 * (n % (kp // 2))
    if plan.parity:
        na, half = plan.positions(plan.dir), plan.nq // 2
        row, part = a % na, a // na
        return (((part * plan.panels * half + row) * kp + m) if plan.d_panels
                else row * plan.nq + part * half + m), a * plan.ds + m
    return (a * kp + m if plan.d_panels else a * plan.nq + m), a * plan.ds + m


def _trips(plan, pairs: int, offsets, what: str) -> CopyTrips:
    threads = plan.kernel.threads
    tid = np.arange(min(threads, pairs))
    g0, s0 = offsets(plan, tid)
    deltas = []
    for t in range(-(-pairs // threads)):
        mine = tid[tid + t * threads < pairs]
        g, s = offsets(plan, mine + t * threads)
        dg, ds = np.unique(g - g0[mine]), np.unique(s - s0[mine])
        if len(dg) != 1 or len(ds) != 1:
            raise ComposerError(
                f"kernel {plan.name}: copies = \"pointers\" needs each thread's {what} copies at the same offsets "
                f"from its first one for every thread; trip {t} of {threads} threads over {pairs} pairs is not "
                f"(use copies = \"unrolled\")")
        deltas.append((int(dg[0]), int(ds[0])))
    return CopyTrips(pairs, threads, tuple(deltas))


def f_trips(plan) -> CopyTrips:
    """The F panel's (q, vel or their product) copy program of ``plan``."""
    return _trips(plan, plan.lines(plan.dir) * plan.k_panel // 2, f_pair_offsets, "F panel")


def mirror_trips(plan) -> CopyTrips:
    """The mirrored F pairs' program of a parity ``plan`` (the same shared-memory offsets as f_trips')."""
    trips = _trips(plan, plan.lines(plan.dir) * plan.k_panel // 2, f_mirror_offsets, "mirrored F panel")
    assert [s for _, s in trips.deltas] == [s for _, s in f_trips(plan).deltas]
    return trips


def d_trips(plan) -> CopyTrips:
    """The D panel's copy program of ``plan`` (with parity, of its virtual rows: twice the positions)."""
    return _trips(plan, plan.virtual_positions * plan.k_panel // 2, d_pair_offsets, "D panel")


def panel_strides(plan) -> tuple[int, int]:
    """Doubles from one panel's copies to the next: (F: k_panel nodes along the carried axis (with parity
    the mirrors move as far the other way), D: k_panel columns of its rows, or one k-panel copy of its Nq
    rows, with parity h parity rows)."""
    kp, nq = plan.k_panel, plan.nq
    rows = nq // 2 if plan.parity else nq
    return kp * (1, nq, nq * nq)[plan.dir], (rows * kp if plan.d_panels else kp)


def program(plan, tid: np.ndarray, p: int, a_org: int, k0: int, j0: int, i0: int):
    """What the pointer program copies at panel p: per operand (F, D, and with parity F's mirrors) the
    (global offset, shared offset, thread mask) of each trip for the threads ``tid``, global offsets
    in-element (F) or into D's flat layout (D). The emulator stages through this."""
    f_stride, d_stride = panel_strides(plan)
    f, d = f_trips(plan), d_trips(plan)
    nq = plan.nq
    # the template's node(0, 0, k0, j0, i0): the box origin's offset (the carried axis's own origin
    # is not in it: the contraction runs over the whole axis)
    origin = ((k0 * nq + j0) * nq, k0 * nq * nq + i0, j0 * nq + i0)[plan.dir]
    out = []
    programs = [(f, f_pair_offsets, origin, f_stride),
                (d, d_pair_offsets, a_org * (plan.k_panel if plan.d_panels else nq), d_stride)]
    if plan.parity:  # the mirrored pairs third: their panels go down the axis
        programs.append((mirror_trips(plan), f_mirror_offsets, origin, -f_stride))
    for trips, offsets, base, stride in programs:
        g0, s0 = offsets(plan, np.minimum(tid, trips.pairs - 1))
        rows = []
        for t, (dg, ds) in enumerate(trips.deltas):
            bound = trips.guard(t)
            mask = np.ones(len(tid), bool) if bound is None else tid < bound
            rows.append((base + g0 + p * stride + dg, s0 + ds, mask))
        out.append(rows)
    return out
