"""Pluggable GEMM epilogues: what happens to each accumulator once the mainloop is done.

An epilogue is traced inside the CuTe DSL kernel, once per output *site*: one accumulator, or an
n-adjacent pair the kernel may store as one 16-byte vector (C n-contiguous, ``pairs`` set). The
kernel has already checked the site's bounds and computed its :class:`OutputSite` (in-batch
coordinates and C offset); the :class:`EpilogueContext` holds the kernel's C pointer, the
auxiliary pointers (volume arrays in C's layout, batch offsets applied), the face pointer, the
batch index and the ``alpha``/``beta`` scalars of the fixed kernel ABI, so new (fused)
epilogues need no new launch code.

An epilogue splits into ``values`` (loads and arithmetic) and ``store``: on an interior tile the
kernel computes the values of ``store_group`` sites before their stores, so the loads of those
sites are free to overlap (no store between them that might alias); the group bounds the
registers the loads hold (sm_90, z carrier at p = 127: 128 registers with groups of 4 sites, 182
with the whole tile, which halves the resident blocks).

``EPILOGUES`` holds the epilogues without parameters (a GemmConfig names one); ``"tree"`` is an
epilogue visitor tree (``composer.epilogues``), an instance the kernel is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Sequence


@dataclass
class EpilogueContext:
    """Device-side handles an epilogue may use (DSL values; built inside the kernel)."""

    c: Any  # cute.Pointer to C of this batch
    aux: tuple[Any, ...]  # cute.Pointers to the aux arrays of this batch (C's ldc and batch stride)
    face: Any  # cute.Pointer to the face array (not batch-offset: the epilogue finds its element)
    batch: Any  # Int32 batch index
    c_stride_m: Any  # element strides of C(m, n)
    c_stride_n: Any
    alpha: Any
    beta: Any


@dataclass
class OutputSite:
    """One site: in-batch coordinates (Int32) of its first element and that element's offset from
    ``ctx.c`` (Int64); a pair's second element is at (m, n + 1), offset + 1."""

    m: Any
    n: Any
    offset: Any


class Epilogue:
    """Base: ``values`` computes what ``store`` writes at a site of one or two elements."""

    name: ClassVar[str]
    pairs: ClassVar[bool] = False  # handles two-element sites (n even, C n-contiguous, ldc even)
    store_group: int | None = None  # sites computed before their stores (None: the whole tile)

    def values(self, ctx: EpilogueContext, site: OutputSite, acc: Sequence[Any]) -> list[Any]:
        raise NotImplementedError

    def store(self, ctx: EpilogueContext, site: OutputSite, values: Sequence[Any]) -> None:
        """C at the site = ``values`` (one 16-byte store for a pair)."""
        from composer.gemm.cute.atom import stg_f64, stg_f64x2

        address = (ctx.c + site.offset).toint()
        if len(values) == 2:
            stg_f64x2(address, values[0], values[1])
        else:
            stg_f64(address, values[0])

    def pair_condition(self, ctx: EpilogueContext) -> Any:
        """A runtime condition pairs need beyond C's own alignment (None: none)."""
        return None

    @property
    def prefetch_slots(self) -> tuple[int, ...]:
        """The aux slots whose arrays the epilogue reads at every output element (in C's layout):
        what ``GemmConfig.epilogue_prefetch`` brings into L2 during the mainloop (none here)."""
        return ()

    def key(self) -> dict[str, Any]:
        """What identifies the compiled epilogue (the CUBIN cache key and the build manifest)."""
        return {"name": self.name}


class StoreEpilogue(Epilogue):
    """``C = acc`` (BLAS alpha = 1, beta = 0): the plain volume GEMM."""

    name = "store"
    pairs = True

    def values(self, ctx: EpilogueContext, site: OutputSite, acc: Sequence[Any]) -> list[Any]:
        return list(acc)


#: The parameterless epilogues a GemmConfig may name, by name.
EPILOGUES: dict[str, type[Epilogue]] = {cls.name: cls for cls in (StoreEpilogue,)}
#: Epilogue families specialized per instance (the kernel is given the instance).
SPECIALIZED = ("tree",)
#: Every name a GemmConfig may give (GemmConfig.validate rejects any other).
EPILOGUE_NAMES = (*EPILOGUES, *SPECIALIZED)
