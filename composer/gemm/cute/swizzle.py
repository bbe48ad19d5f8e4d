"""The shared-memory address model of the CuTe GEMM kernel, in plain Python (no DSL import).

The kernel stores each operand's pipeline buffers XOR-swizzled (``swizzle_bits``) and, at trace
time, precomputes which fragment loads and which cp.async copies can share one address register
plus compile-time immediates (``frag_plan``, ``interior_steps``). Those decisions only need the
swizzle arithmetic, so they live here: the configuration check, the tests and the kernel use the
same model, and the kernel checks it against cute's own layout when it is traced.
"""

from __future__ import annotations

import math
from typing import Any


def swizzle_bits(contig: int) -> tuple[int, int, int]:
    """(B, M, S) of the XOR swizzle for a tile whose contiguous extent is ``contig`` doubles.

    The fragment loads of a half-warp read (row g, col t), g, t in 0..3, on a tile stored with
    ``contig`` doubles per line. Bits [2, 4) of the in-line index are XORed with the two lowest
    line-index bits, which sit at bit log2(contig); for contig = 8 only line bit 1 is needed
    (line bit 0 already lands on the other half of the 32 banks); contig = 4 is conflict-free
    as is. M = 2 keeps pairs (16 B cp.async chunks) and quads contiguous.
    """
    if contig >= 16:
        return 2, 2, int(math.log2(contig)) - 2
    if contig == 8:
        return 1, 2, 2
    return 0, 2, 0


def swizzled_offset(r: int, kk: int, stage: int, rows: int, bk: int, mn_major: bool) -> int:
    """Element offset of (r, kk, stage) in ``smem_layout(rows, bk, mn_major, stages)``, in plain
    Python (cute's ``Swizzle(B, M, S)``: bits [M+S, M+S+B) are XORed into bits [M, M+B))."""
    contig = rows if mn_major else bk
    plain = (r + kk * rows if mn_major else r * bk + kk) + stage * rows * bk
    b, m, s = swizzle_bits(contig)
    if b == 0:
        return plain
    yyy = ((1 << b) - 1) << (m + s)
    return plain ^ ((plain & yyy) >> s)


def frag_plan(rows: int, bk: int, mn_major: bool, thread_parts: list[tuple[int, int]],
              elems: dict[Any, tuple[int, int]]) -> tuple[list[tuple[int, int]], dict[Any, tuple[int, int]]]:
    """Group fragment elements so each load is ``base[group] + constant``.

    ``thread_parts`` lists every thread's runtime (row, k) part, ``elems`` maps a key to the
    compile-time (row, k) part of a fragment element. Two elements share a base when their
    swizzled offsets differ by the same amount in every thread (checked exhaustively). Returns the
    groups' representative compile-time parts and, per key, (group, byte offset from its base).
    """
    groups: list[tuple[tuple[int, int], list[int]]] = []
    plan: dict[Any, tuple[int, int]] = {}
    for key, (rc, kc) in elems.items():
        vec = [swizzled_offset(rt + rc, kt + kc, 0, rows, bk, mn_major) for rt, kt in thread_parts]
        for gi, (_rep, rvec) in enumerate(groups):
            d = vec[0] - rvec[0]
            if all(v - w == d for v, w in zip(vec, rvec)):
                plan[key] = (gi, 8 * d)
                break
        else:
            groups.append(((rc, kc), vec))
            plan[key] = (len(groups) - 1, 0)
    return [rep for rep, _ in groups], plan


def interior_steps(rows: int, bk: int, vec: int, threads: int, mn_major: bool
                   ) -> tuple[int, list[int]] | None:
    """How one thread's cp.async copies of an interior (rows x bk) tile relate to its first one:
    (lines its chunk index advances per copy along the non-contiguous mode, byte offsets of the
    copies' swizzled shared-memory destinations from the first one), or None when those offsets
    are not the same for every thread (then the predicated path serves every tile).

    Why it matters: when they are, the mainloop needs one address register per operand and
    thread plus immediates, instead of recomputing swizzled addresses per copy. Checked
    exhaustively over the block's threads with the swizzle model (pure Python, at trace time).
    """
    per_line = (rows if mn_major else bk) // vec  # chunks along the contiguous mode
    if (rows * bk // vec) % threads or threads % per_line:
        return None
    copies = rows * bk // vec // threads

    def coords(tid: int, it: int) -> tuple[int, int]:
        cidx = tid + it * threads
        if mn_major:
            return (cidx % per_line) * vec, cidx // per_line
        return cidx // per_line, (cidx % per_line) * vec

    steps = []
    for it in range(copies):
        deltas = {swizzled_offset(*coords(tid, it), 0, rows, bk, mn_major)
                  - swizzled_offset(*coords(tid, 0), 0, rows, bk, mn_major) for tid in range(threads)}
        if len(deltas) != 1:
            return None
        steps.append(8 * deltas.pop())
    return threads // per_line, steps


def stage_stride_clear(rows: int, bk: int, mn_major: bool) -> bool:
    """Whether one stage's (rows x bk) buffer spans whole swizzle periods.

    The interior copies add the stage offset after swizzling a stage-0 address; that is only
    right when the offset leaves the swizzled bits alone, i.e. when ``rows * bk`` is a multiple
    of the swizzle's period ``2**(M + S + B)``.
    """
    b, m, s = swizzle_bits(rows if mn_major else bk)
    return (rows * bk) % (1 << (m + s + b)) == 0
