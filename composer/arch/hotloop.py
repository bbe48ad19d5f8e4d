"""Memory instructions per MMA in the hot loop of a fused kernel's SASS (a CPU-side check).

Why: a streamed fused tensor-core kernel can be bound by how often it fetches the B operand (D)
per DMMA (the measurements are in docs/history.md), and the SASS is the only place to count that
without the GPU. The hot loop is the
innermost backward branch whose body holds the contraction instructions (DMMA, or DFMA for the
ablation); its counts of LDG / LDGSTS / LDS / DMMA / DFMA / BAR are what a schedule pays per trip.
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

_LINE = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Za-z0-9_]+)*)\s*(.*?);")
_BRA = re.compile(r"0x([0-9a-fA-F]+)")
COUNTED = ("LDG", "LDGSTS", "LDS", "STS", "DMMA", "DFMA", "BAR", "LDL", "STL")


@dataclass(frozen=True)
class HotLoop:
    """Opcode counts of the innermost loop holding the contraction ([start, end] byte addresses)."""

    start: int
    end: int
    counts: dict[str, int] = field(default_factory=dict)
    instructions: int = 0  # every instruction of the body, predicated-off padding included
    inner_loops: int = 0  # backward branches inside the body (loops nested in the hot loop)

    @property
    def mma(self) -> int:
        return self.counts.get("DMMA", 0) or self.counts.get("DFMA", 0)

    def per_mma(self, opcode: str) -> float:
        return self.counts.get(opcode, 0) / self.mma if self.mma else float("nan")

    def summary(self) -> str:
        c = self.counts
        return (f"LDG {c.get('LDG', 0)} LDGSTS {c.get('LDGSTS', 0)} LDS {c.get('LDS', 0)} "
                f"DMMA {c.get('DMMA', 0)} DFMA {c.get('DFMA', 0)} BAR {c.get('BAR', 0)} "
                f"(LDG+LDGSTS per MMA {(c.get('LDG', 0) + c.get('LDGSTS', 0)) / max(self.mma, 1):.2f})")


def _instructions(sass: str) -> list[tuple[int, str, str]]:
    out = []
    for line in sass.splitlines():
        m = _LINE.match(line)
        if m:
            out.append((int(m.group(1), 16), m.group(2), m.group(4)))
    return out


def hot_loop(sass: str) -> HotLoop:
    """The innermost loop (backward branch) of ``sass`` (one kernel) that holds DMMA or DFMA."""
    instrs = _instructions(sass)
    loops = []
    for addr, op, operands in instrs:
        if op == "BRA":
            target = _BRA.search(operands)
            if target and int(target.group(1), 16) < addr:
                loops.append((int(target.group(1), 16), addr))
    def body(start: int, end: int) -> HotLoop:
        ops = [op for a, op, _ in instrs if start <= a <= end]
        counts = Counter(op for op in ops if op in COUNTED)
        nested = sum(1 for s, e in loops if start <= s and e < end)
        return HotLoop(start, end, dict(counts), len(ops), nested)

    best: HotLoop | None = None
    for start, end in loops:
        loop = body(start, end)
        if not (loop.counts.get("DMMA") or loop.counts.get("DFMA")):
            continue
        if best is None or end - start < best.end - best.start:
            best = loop
    if best is None:  # fully unrolled: the whole kernel
        best = body(0, instrs[-1][0] if instrs else 0)
    return best


def kernel_hot_loop(cubin: bytes) -> HotLoop:
    """:func:`hot_loop` of the (single-kernel) CUBIN, disassembled by ``cuobjdump -sass``."""
    from composer.arch.sass import disassemble

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        return hot_loop(disassemble(path))
