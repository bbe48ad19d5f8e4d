"""An epilogue visitor tree emitted into the CuTe DSL GEMM kernel's epilogue hook.

:class:`TreeEpilogue` is the kernel's epilogue for one (tree, output index) pair, both
compile-time constants: the tree walk of :mod:`composer.epilogues.evaluate` runs at trace time on
a DSL backend, so the kernel holds exactly the loads, arithmetic and store the tree names, with
the index math specialized to Nq. Leaves become kernel parameters of the fixed ABI: each distinct
Aux array takes the next ``aux`` slot (``slots``, recorded in the build manifest so the runtime
binds names to pointers), the Face leaf the ``face`` pointer, Scalar leaves ``alpha``/``beta``.

Memory instructions (``composer.gemm.cute.atom``): aux arrays are read with ``ld.global`` (the
fold's y GEMM reads the partial sum it overwrites, so no non-coherent path), 16 bytes per load on
a pair site; face values with predicated loads (no branch: a node off every face issues the loads
with a false predicate and reads nothing). Pair sites need C n-contiguous and Nq even
(``OutputIndex.pairs_share_row``), and at run time every aux pointer and the face pointer 16-byte
aligned (``pair_condition``), else the kernel falls back to one element per site.
"""

from __future__ import annotations

from typing import Any, Sequence

import cutlass
from cutlass import Float64, Int32, Int64, Uint32

from composer.epilogues.evaluate import site_values
from composer.epilogues.index import OutputIndex
from composer.epilogues.kernels import DEFAULT_STORE_GROUP
from composer.epilogues.tree import Face, Store, aux_names, check_tree, face_names, reads_split, text, to_dict, walk
from composer.gemm.cute.atom import fma_f64, ldg_f64, ldg_f64_if, ldg_f64x2, ldg_f64x2_if
from composer.gemm.cute.config import AUX_SLOTS
from composer.gemm.cute.epilogue import Epilogue, EpilogueContext, OutputSite


class DslBackend:
    """Tree values at one kernel site, as DSL values (see ``evaluate.Backend``)."""

    def __init__(self, ctx: EpilogueContext, site: OutputSite, acc: Sequence[Any], slots: dict[str, int]) -> None:
        self.width = len(acc)
        self.ctx, self.site, self.acc, self.slots = ctx, site, list(acc), slots

    def accumulator(self) -> list[Any]:
        return self.acc

    def aux(self, name: str) -> list[Any]:
        address = (self.ctx.aux[self.slots[name]] + self.site.offset).toint()
        return list(ldg_f64x2(address)) if self.width == 2 else [ldg_f64(address)]

    def scalar(self, name: str) -> Any:
        return getattr(self.ctx, name)

    def face(self, name: str, predicate: Any, offset: Any) -> Any:
        return ldg_f64_if((self.ctx.face + offset).toint(), _flag(predicate))

    def face_pair(self, name: str, predicate: Any, offset: Any) -> tuple[Any, Any]:
        return ldg_f64x2_if((self.ctx.face + offset).toint(), _flag(predicate))

    def fma(self, a: Any, b: Any, c: Any) -> Any:
        return fma_f64(a, b, c)

    def wide(self, value: Any) -> Any:
        return Int64(value)

    def aux_at(self, name: str, offset: Any) -> Any:
        return ldg_f64((self.ctx.aux[self.slots[name]] + offset).toint())

    def select(self, predicate: Any, a: Any, b: Any) -> Any:
        if isinstance(a, float):
            a, b = Float64(a), Float64(b)
        return cutlass.select_(predicate, a, b)


def _flag(predicate: Any) -> Int32:
    """A DSL boolean as the Int32 the predicated loads test."""
    return cutlass.select_(predicate, Int32(1), Int32(0))


class TreeEpilogue(Epilogue):
    """The kernel epilogue of ``tree`` on the output index ``index`` (role, swap, Nq)."""

    name = "tree"

    def __init__(self, tree: Store, index: OutputIndex, store_group: int | None = DEFAULT_STORE_GROUP) -> None:
        self.tree = check_tree(tree, max_aux=AUX_SLOTS)
        self.index = index
        if store_group is not None and store_group < 1:
            raise ValueError(f"store_group must be a positive number of sites, got {store_group}")
        self.store_group = store_group
        self.slots = {name: slot for slot, name in enumerate(aux_names(tree))}
        self.face_array = next(iter(face_names(tree)), None)
        has_face = any(isinstance(n, Face) for n in walk(tree))
        # a pair's LIFT and a split array's merge rely on both nodes sharing a row (Nq even); aux-only
        # trees just need adjacent elements, which C n-contiguous gives
        by_node = has_face or reads_split(tree)
        self.pairs = index.pairs_share_row if by_node else index.c_n_contiguous  # type: ignore[misc]

    def values(self, ctx: EpilogueContext, site: OutputSite, acc: Sequence[Any]) -> list[Any]:
        # unsigned: the coordinates are non-negative, and // and % by the constant Nq then need no
        # sign fix-up (a shift and a mask for a power of two, a multiply-high otherwise)
        node = self.index.node(Uint32(site.m), Uint32(site.n), Uint32(ctx.batch))
        return site_values(self.tree, DslBackend(ctx, site, acc, self.slots), node, self.index.nq)

    def pair_condition(self, ctx: EpilogueContext) -> Any:
        pointers = [ctx.aux[s] for s in self.slots.values()] + ([ctx.face] if self.face_array else [])
        ok = None
        for ptr in pointers:
            aligned = (ptr.toint() % 16) == 0
            ok = aligned if ok is None else ok & aligned
        return ok

    @property
    def prefetch_slots(self) -> tuple[int, ...]:
        return tuple(self.slots.values())

    def key(self) -> dict[str, Any]:
        return {"name": self.name, "tree": to_dict(self.tree), "text": text(self.tree),
                "index": {"role": self.index.role, "swap": self.index.swap, "nq": self.index.nq},
                "aux_slots": list(self.slots), "face": self.face_array, "store_group": self.store_group}
