"""Our FP64 tensor-core MMA atom and cp.async, as inline PTX inside CuTe DSL kernels.

Why inline PTX: CuTe DSL 4.8.1 has no FP64 tensor-core op (``cute.nvgpu.warp`` stops at TF32,
``MmaUniversalOp(Float64)`` is SIMT DFMA, WGMMA has no FP64), and ``nvvm.mma_sync`` accepts only
m8n8k4 and aborts the process when its PTX types are omitted. ``llvm.inline_asm`` issues all four
``mma.sync ... .f64`` shapes. cp.async is inline PTX too because we need its ``src-size``
operand: a source size of 0 (or 8 of 16 bytes) zero-fills shared memory, which is exactly the
predication ragged K edges need (a stale tile from an earlier stage must not leak into the sum).

Fragment ownership (g = lane // 4, t = lane % 4; checked against CUTLASS's sm90 mma traits):
A ``a_i = A[g + 8*(i%2), t + 4*(i//2)]``, B ``b_i = B[k = t + 4*i, n = g]``,
C/D ``d_r = D[g + 8*(r//2), 2t + r%2]``.
"""

from __future__ import annotations

from typing import Any, Sequence

from cutlass import Float64, Int32, Int64
from cutlass._mlir.dialects import llvm

from composer.arch.mma import MmaShape


def a_coord(i: int) -> tuple[int, int]:
    """(row offset from g, col offset from t) of A register ``i``."""
    return 8 * (i % 2), 4 * (i // 2)


def b_coord(i: int) -> int:
    """k offset from t of B register ``i`` (its n is g)."""
    return 4 * i


def d_coord(r: int) -> tuple[int, int]:
    """(row offset from g, col offset from 2t) of accumulator register ``r``."""
    return 8 * (r // 2), r % 2


def mma_asm(shape: MmaShape) -> tuple[str, str]:
    """The PTX string and LLVM constraint string of ``D = A B + C`` for ``shape``."""
    nc, na, nb = shape.c_regs, shape.a_regs, shape.b_regs
    regs = iter(range(nc + na + nb + nc))
    d = ", ".join(f"${next(regs)}" for _ in range(nc))
    a = ", ".join(f"${next(regs)}" for _ in range(na))
    b = ", ".join(f"${next(regs)}" for _ in range(nb))
    c = ", ".join(f"${next(regs)}" for _ in range(nc))
    ptx = f"mma.sync.aligned.{shape.ptx}.row.col.f64.f64.f64.f64 {{{d}}}, {{{a}}}, {{{b}}}, {{{c}}};"
    constraints = ",".join(["=d"] * nc + ["d"] * (na + nb + nc))
    return ptx, constraints


def dmma(shape: MmaShape, a: Sequence[Any], b: Sequence[Any], c: Sequence[Any]) -> list[Float64]:
    """Issue one warp-wide FP64 MMA; ``a``/``b``/``c`` are this thread's Float64 fragments."""
    if (len(a), len(b), len(c)) != (shape.a_regs, shape.b_regs, shape.c_regs):
        raise ValueError(f"{shape.name}: fragments {len(a)}/{len(b)}/{len(c)} != "
                         f"{shape.a_regs}/{shape.b_regs}/{shape.c_regs}")
    ptx, constraints = mma_asm(shape)
    f64 = Float64.mlir_type
    result_type = llvm.StructType.get_literal([f64] * shape.c_regs)
    operands = [Float64(x).ir_value() for x in (*a, *b, *c)]
    res = llvm.inline_asm(result_type, operands, ptx, constraints, has_side_effects=True,
                          is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)
    return [Float64(llvm.extractvalue(f64, res, [r])) for r in range(shape.c_regs)]


def cp_async(smem_addr: Any, gmem_addr: Any, src_bytes: Any, vec: int) -> None:
    """``cp.async`` of ``8*vec`` bytes; bytes past ``src_bytes`` are zero-filled.

    16-byte copies bypass L1 (``.cg``: the tile is staged in shared memory anyway); 8-byte copies
    must use ``.ca`` (``.cg`` allows only 16).
    """
    size = 8 * vec
    cache = "cg" if size == 16 else "ca"
    llvm.inline_asm(None, [Int32(smem_addr).ir_value(), Int64(gmem_addr).ir_value(),
                           Int32(src_bytes).ir_value()],
                    f"cp.async.{cache}.shared.global [$0], [$1], {size}, $2;", "r,l,r",
                    has_side_effects=True, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)


def cp_async_full(smem_addr: Any, gmem_addr: Any, vec: int) -> None:
    """``cp.async`` of ``8*vec`` bytes that are all in bounds (no source-size operand): the copy
    of an interior tile, with no predicate or zero-fill arithmetic."""
    size = 8 * vec
    cache = "cg" if size == 16 else "ca"
    llvm.inline_asm(None, [Int32(smem_addr).ir_value(), Int64(gmem_addr).ir_value()],
                    f"cp.async.{cache}.shared.global [$0], [$1], {size};", "r,l",
                    has_side_effects=True, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)


def nsmid() -> Int32:
    """``%nsmid``: the number of SM identifiers (at least the SMs the GPU has; identifiers may have
    gaps, so a stagger that divides by it spreads the first wave slightly wider than the SMs hold)."""
    res = llvm.inline_asm(Int32.mlir_type, [], "mov.u32 $0, %nsmid;", "=r", has_side_effects=True,
                          is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)
    return Int32(res)


def wait_ns(delay_ns: Any) -> None:
    """Wait until ``%globaltimer`` has advanced ``delay_ns`` nanoseconds: ``nanosleep`` rounds of
    256 ns (the warp gives up its issue slots to the SM's other blocks) between reads of the timer. The
    global timer, not the SM clock: a power-capped clock would stretch a cycle count."""
    llvm.inline_asm(None, [Int64(delay_ns).ir_value()],
                    "{\n.reg .u64 wait_t0, wait_t1;\n.reg .pred wait_p;\nmov.u64 wait_t0, %globaltimer;\n"
                    "wait_ns_${:uid}:\nnanosleep.u32 256;\nmov.u64 wait_t1, %globaltimer;\n"
                    "sub.u64 wait_t1, wait_t1, wait_t0;\nsetp.lt.u64 wait_p, wait_t1, $0;\n"
                    "@wait_p bra wait_ns_${:uid};\n}", "l",
                    has_side_effects=True, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)


def lds_f64(smem_addr: Any, offset: int = 0) -> Float64:
    """``ld.shared.f64`` from byte address ``smem_addr + offset`` (``offset`` a compile-time
    immediate, so a fragment load costs one LDS and no address arithmetic)."""
    f64 = Float64.mlir_type
    res = llvm.inline_asm(f64, [Int32(smem_addr).ir_value()], f"ld.shared.f64 $0, [$1+{int(offset)}];",
                          "=d,r", has_side_effects=True, is_align_stack=False,
                          asm_dialect=llvm.AsmDialect.AD_ATT)
    return Float64(res)


def sts_f64(smem_addr: Any, offset: int, x: Any) -> None:
    """``st.shared.f64`` of ``x`` to byte address ``smem_addr + offset`` (``offset`` an immediate)."""
    llvm.inline_asm(None, [Int32(smem_addr).ir_value(), Float64(x).ir_value()],
                    f"st.shared.f64 [$0+{int(offset)}], $1;", "r,d",
                    has_side_effects=True, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)


def lds_f64x2(smem_addr: Any, offset: int = 0) -> tuple[Float64, Float64]:
    """``ld.shared.v2.f64``: 16 bytes at a 16-byte aligned byte address ``smem_addr + offset``."""
    f64 = Float64.mlir_type
    pair = llvm.StructType.get_literal([f64, f64])
    res = llvm.inline_asm(pair, [Int32(smem_addr).ir_value()], f"ld.shared.v2.f64 {{$0, $1}}, [$2+{int(offset)}];",
                          "=d,=d,r", has_side_effects=True, is_align_stack=False,
                          asm_dialect=llvm.AsmDialect.AD_ATT)
    return Float64(llvm.extractvalue(f64, res, [0])), Float64(llvm.extractvalue(f64, res, [1]))


def sts_f64x2(smem_addr: Any, offset: int, x0: Any, x1: Any) -> None:
    """``st.shared.v2.f64`` of ``(x0, x1)`` to 16-byte aligned byte address ``smem_addr + offset``."""
    llvm.inline_asm(None, [Int32(smem_addr).ir_value(), Float64(x0).ir_value(), Float64(x1).ir_value()],
                    f"st.shared.v2.f64 [$0+{int(offset)}], {{$1, $2}};", "r,d,d",
                    has_side_effects=True, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)


def stg_f64(gmem_addr: Any, x: Any) -> None:
    """``st.global.f64``: 8 bytes at an 8-byte aligned global address."""
    llvm.inline_asm(None, [Int64(gmem_addr).ir_value(), Float64(x).ir_value()], "st.global.f64 [$0], $1;", "l,d",
                    has_side_effects=True, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)


def stg_f64x2(gmem_addr: Any, x0: Any, x1: Any) -> None:
    """``st.global.v2.f64``: 16 bytes at a 16-byte aligned global address."""
    llvm.inline_asm(None, [Int64(gmem_addr).ir_value(), Float64(x0).ir_value(), Float64(x1).ir_value()],
                    "st.global.v2.f64 [$0], {$1, $2};", "l,d,d", has_side_effects=True,
                    is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)


def ldg_f64(gmem_addr: Any) -> Float64:
    """``ld.global.f64`` (coherent: the fold's y GEMM reads the array it writes, element by element)."""
    f64 = Float64.mlir_type
    res = llvm.inline_asm(f64, [Int64(gmem_addr).ir_value()], "ld.global.f64 $0, [$1];", "=d,l",
                          has_side_effects=True, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)
    return Float64(res)


def ldg_f64x2(gmem_addr: Any) -> tuple[Float64, Float64]:
    """``ld.global.v2.f64``: 16 bytes at a 16-byte aligned global address."""
    f64 = Float64.mlir_type
    res = llvm.inline_asm(llvm.StructType.get_literal([f64, f64]), [Int64(gmem_addr).ir_value()],
                          "ld.global.v2.f64 {$0, $1}, [$2];", "=d,=d,l", has_side_effects=True,
                          is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)
    return Float64(llvm.extractvalue(f64, res, [0])), Float64(llvm.extractvalue(f64, res, [1]))


def ldg_f64_if(gmem_addr: Any, predicate: Any) -> Float64:
    """``@p ld.global.f64`` with 0 where ``predicate`` (an Int32, nonzero: load) is false: one
    predicated load and no branch (the face values of the boundary nodes)."""
    f64 = Float64.mlir_type
    ptx = ("{ .reg .pred p; setp.ne.s32 p, $2, 0; mov.b64 $0, 0; @p ld.global.f64 $0, [$1]; }")
    res = llvm.inline_asm(f64, [Int64(gmem_addr).ir_value(), Int32(predicate).ir_value()], ptx, "=d,l,r",
                          has_side_effects=True, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)
    return Float64(res)


def ldg_f64x2_if(gmem_addr: Any, predicate: Any) -> tuple[Float64, Float64]:
    """``@p ld.global.v2.f64`` (16-byte aligned) with zeros where ``predicate`` is false."""
    f64 = Float64.mlir_type
    ptx = ("{ .reg .pred p; setp.ne.s32 p, $3, 0; mov.b64 $0, 0; mov.b64 $1, 0; "
           "@p ld.global.v2.f64 {$0, $1}, [$2]; }")
    res = llvm.inline_asm(llvm.StructType.get_literal([f64, f64]),
                          [Int64(gmem_addr).ir_value(), Int32(predicate).ir_value()], ptx, "=d,=d,l,r",
                          has_side_effects=True, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)
    return Float64(llvm.extractvalue(f64, res, [0])), Float64(llvm.extractvalue(f64, res, [1]))


def prefetch_l2_if(gmem_addr: Any, predicate: Any) -> None:
    """``@p prefetch.global.L2``: bring the 128-byte line of a global address into L2 without a
    register to wait on (the carrier's epilogue operands, issued during the mainloop)."""
    ptx = "{ .reg .pred p; setp.ne.s32 p, $1, 0; @p prefetch.global.L2 [$0]; }"
    llvm.inline_asm(None, [Int64(gmem_addr).ir_value(), Int32(predicate).ir_value()], ptx, "l,r",
                    has_side_effects=True, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)


def fma_f64(a: Any, b: Any, c: Any) -> Float64:
    """``fma.rn.f64``: ``a * b + c`` rounded once, as the tree's Fma node says."""
    f64 = Float64.mlir_type
    res = llvm.inline_asm(f64, [Float64(x).ir_value() for x in (a, b, c)], "fma.rn.f64 $0, $1, $2, $3;",
                          "=d,d,d,d", has_side_effects=False, is_align_stack=False,
                          asm_dialect=llvm.AsmDialect.AD_ATT)
    return Float64(res)
