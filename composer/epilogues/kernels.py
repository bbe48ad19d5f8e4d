"""The GEMM kernels of a fused plan: each role's mainloop configuration (GEMM_CUTE's tiles) with the
epilogue tree the plan gives it. Pure Python: the build plan, the path and the tests reason about
them without the DSL; :meth:`FusedGemm.epilogue` builds the kernel's epilogue (DSL) when compiling.

A role whose tree is the unweighted store is GEMM_CUTE's kernel unchanged (same configuration,
same build job); every other role runs the same mainloop with ``epilogue = "tree"``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any

from composer.epilogues.index import OutputIndex
from composer.epilogues.paper import FusedPlan, store
from composer.epilogues.tree import Store, aux_names, face_names, text, to_dict
from composer.gemm.cute.config import GemmConfig, kernel_problem
from composer.gemm.cute.epilogue import Epilogue
from composer.gemm.cute.tiles import role_kernel
from composer.gemm.roles import gemm_spec

#: Sites whose values a tree kernel computes before their stores (``Epilogue.store_group``): few
#: enough that a carrier keeps the plain kernel's registers (sm_90, z carrier at p = 127: 128 with
#: 4, 134 with 8, 182 with the whole tile), enough for the group's loads to overlap.
DEFAULT_STORE_GROUP = 4
#: The carrier tile's key for the carrier's own store group (over the table's ``store_group``): the
#: carry epilogue reads five arrays per site, so its group sets how many DRAM round trips a tile's
#: epilogue waits for (p = 511, 128x64 tile: 32 pair sites per thread, 8 round trips with 4).
CARRIER_STORE_GROUP_KEY = "store_group"


@dataclass(frozen=True)
class FusedGemm:
    """One role's kernel in a fused plan."""

    role: str
    swap: bool
    config: GemmConfig
    tree: Store
    index: OutputIndex
    store_group: int = DEFAULT_STORE_GROUP

    @property
    def plain(self) -> bool:
        """Whether this is the unweighted store (GEMM_CUTE's kernel, unless it forms its flux)."""
        return self.tree == store()

    @property
    def forms_flux(self) -> bool:
        """Whether the kernel forms its flux operand from q and a velocity (``GemmConfig.product``)."""
        return bool(self.config.product)

    @property
    def aux_slots(self) -> tuple[str, ...]:
        """Array names bound to the kernel's aux0, aux1, ... parameters, in order."""
        return aux_names(self.tree)

    @property
    def face(self) -> str | None:
        """The face array bound to the kernel's ``face`` parameter (None: unused)."""
        return next(iter(face_names(self.tree)), None)

    def epilogue(self) -> Epilogue | None:
        """The kernel's epilogue instance (None for the plain store, which the config names)."""
        if self.plain:
            return None
        from composer.epilogues.cute_emit import TreeEpilogue

        return TreeEpilogue(self.tree, self.index, self.store_group)

    def describe(self) -> dict[str, Any]:
        """What the build manifest records about the epilogue."""
        return {"text": text(self.tree), "tree": to_dict(self.tree), "aux_slots": list(self.aux_slots),
                "face": self.face, "index": {"role": self.index.role, "swap": self.index.swap, "nq": self.index.nq},
                "store_group": self.store_group}


def flux_operand(role: str, swap: bool) -> str:
    """Which kernel operand ("a" or "b") holds ``role``'s flux (the other is D)."""
    prob = kernel_problem(gemm_spec(role, 2, 1), swap)
    return "a" if prob.a_operand == "flux" else "b"


#: Fewest pipeline stages a staged-product kernel gives up to (the cp.async double buffer).
MIN_STAGED_STAGES = 2


def staged_product_config(formed: GemmConfig, array: GemmConfig, m: int, n: int) -> GemmConfig:
    """A staged-product kernel (``formed``) that holds as many blocks per SM as the kernel reading the
    flux array (``array``), where fewer stages give it: the factor tiles add a third operand's stages,
    and at p = 511 the 128x64x16 3-stage kernels with the factor on the 128-row operand need 120 KB,
    one block per SM (four warps) against the array kernels' two (session 13: ``composer inspect``).
    The array kernel's blocks: those its shared memory holds, at most those its register cap does (255
    per thread without ``min_blocks``: the CuTe tiles from p = 127 on take 200-255). Stages are lowered
    one at a time down to MIN_STAGED_STAGES. Both counts are DEFAULT_ARCH's (the H200 the tiles are
    tuned for; a build for another arch gets the same, validated, kernel). Blocks run along the n tiles
    first where they are fewer than the m tiles of the kernel's (m, n) problem (``n_fastest``): the blocks
    that share a panel of the large operand, its q and velocity tiles, then run together and read it
    once. The problem is taken at one element: where the element count multiplies m (the x GEMM at
    p = 7) n has a single tile there, and both orders are the same."""
    target = min(array.smem_blocks(), array.register_blocks())
    while formed.smem_blocks() < target and formed.stages > MIN_STAGED_STAGES:
        formed = replace(formed, stages=formed.stages - 1)
    if -(-n // formed.bn) < -(-m // formed.bm):
        formed = replace(formed, n_fastest=True)
    return formed


def fused_gemms(plan: FusedPlan, mma: str, tiles: Mapping[str, Mapping[str, Any]] | None = None,
                carrier_tile: Mapping[str, Any] | None = None,
                store_group: int = DEFAULT_STORE_GROUP, flux_in_mainloop: bool = False,
                product_staged: bool = False, formed_roles: Collection[str] = ()) -> dict[str, FusedGemm]:
    """Each role's kernel: GEMM_CUTE's tile for it (``tiles[role]`` overrides, as the build reads
    them), the carrier's replaced field by field by ``carrier_tile``; roles in ``plan.roles`` order;
    the tree kernels compute ``store_group`` sites before storing them (the carrier
    ``carrier_tile["store_group"]`` where given). ``flux_in_mainloop``: each
    kernel forms its flux operand as ``q`` times the velocity (``GemmConfig.product``), with
    ``product_staged`` once per staged element (``GemmConfig.product_staged``), on no fewer blocks
    per SM than the array kernel (``staged_product_config``). ``formed_roles``: those roles alone form
    theirs (the overlap's ``overlap_formed``: the first GEMM), the others read flux arrays; the kernel
    of such a role is the one the all-forming build makes for it."""
    out: dict[str, FusedGemm] = {}
    for role in plan.roles:
        overrides = dict((tiles or {}).get(role) or {})
        group = store_group
        if role == plan.carrier:
            own = dict(carrier_tile or {})
            group = int(own.pop(CARRIER_STORE_GROUP_KEY, store_group))
            overrides.update(own)
        rk = role_kernel(role, plan.nq, 1, mma, overrides)
        tree = plan.trees[role]
        cfg = rk.config if tree == store() else replace(rk.config, epilogue="tree")
        if flux_in_mainloop or role in formed_roles:
            formed = replace(cfg, product=flux_operand(role, rk.swap), product_staged=product_staged)
            if product_staged:
                prob = kernel_problem(gemm_spec(role, plan.nq, 1), rk.swap)
                cfg = staged_product_config(formed, cfg, prob.m, prob.n)
            else:
                cfg = formed
        cfg = cfg.validate()
        out[role] = FusedGemm(role, rk.swap, cfg, tree, OutputIndex(role, rk.swap, plan.nq), group)
    return out
