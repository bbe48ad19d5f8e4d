"""The fused element-local paths FUSED, FUSED_TC, FUSED_DFMA and FUSED_TC16 as ``Path`` objects.

One class does the work; the four registered subclasses only name the variant, so the four
paths launch identically and differ only in what the builder renders for them.
"""

from __future__ import annotations

from pathlib import Path as FsPath
from typing import Any, ClassVar

from composer.fused.builder import FusedBuild, build, d_panel_layout, prebuilt
from composer.fused.config import SUPPORTED_ORDERS, FusedConfig, fused_config
from composer.paths.base import Path
from composer.paths.problem import DeviceProblem
from composer.runtime.manifest import requested_build_dir
from composer.runtime.module import Kernel, Module

FACE_BLOCKS_PER_SM = 16  # grid cap of the grid-stride face kernel


def _prefer_shared_carveout(kernel: Kernel) -> None:
    """min_blocks >= 2: ask for the largest shared-memory carveout, so that the driver's L1/shared
    split never caps the blocks per SM below the min_blocks the kernel was compiled for."""
    from composer.runtime.errors import check

    drv = kernel.device._drv
    attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
    check(drv.cuFuncSetAttribute(kernel.function, attr, 100), "cuFuncSetAttribute(carveout)")


class FusedPathBase(Path):
    """Launch the fused kernels of ``variant`` for the problem's order on its device.

    Options: ``config`` (a FusedConfig overriding the schedule's), ``cache_dir`` (NVRTC cache),
    ``build_dir`` (a ``composer build`` directory; default ``$COMPOSER_BUILD_DIR``).
    """

    variant: ClassVar[str]

    def __init__(self, problem: DeviceProblem, **options: Any) -> None:
        super().__init__(problem, **options)
        config: FusedConfig = options.get("config") or fused_config(self.variant, problem.order)
        cache_dir: FsPath | None = options.get("cache_dir")
        self.config = config
        # kernels cross-compiled by `composer build --paths ...` when the build directory holds all of
        # them from this very source; else NVRTC (disk-cached)
        build_dir = requested_build_dir(options.get("build_dir"))
        ready = prebuilt(config, problem.device.arch, build_dir) if build_dir else None
        self.prebuilt = ready is not None
        self.build: FusedBuild = ready or build(config, problem.device.arch, cache_dir)
        self._modules: list[Module] = []
        self._launches: list[tuple[Kernel, int, int, int, bool]] = []  # kernel, grid, block, smem, face?
        ne = problem.num_elements
        for built in self.build.kernels:
            module = Module.from_cubin(built.compiled.cubin, problem.device)
            self._modules.append(module)
            kernel = module.get_kernel(built.compiled.symbol(built.name), built.signature, built.threads,
                                       built.smem_bytes)
            if config.min_blocks >= 2 and built.blocks_per_element:
                _prefer_shared_carveout(kernel)
            if built.blocks_per_element:
                # elements_per_block > 1 (whole-element boxes only): one block walks that many elements
                grid = -(-ne // config.elements_per_block) * built.blocks_per_element
            else:
                work = ne * 6 * problem.nq**2
                grid = max(1, min(-(-work // built.threads), problem.device.sm_count * FACE_BLOCKS_PER_SM))
            self._launches.append((kernel, grid, built.threads, built.smem_bytes, not built.blocks_per_element))
        self.vmap_m, self.vmap_p = problem.index_maps32()
        self.fstar = (problem.allocate(f"{self.name}.fstar", 8 * ne * 6 * problem.nq**2)
                      if config.flux == "array" else None)
        self.diff = problem.diff  # d_layout = "panels": the k-panel copy of D the kernels read instead
        if config.d_layout == "panels":
            from composer import dg

            panels = d_panel_layout(dg.diff_matrix(problem.order), config.k_panel)
            self.diff = problem.allocate(f"{self.name}.d_panels", panels.nbytes)
            self.diff.copy_from(panels, problem.stream)
            problem.stream.synchronize()  # the host copy is a temporary

    @property
    def kernels(self) -> list[Kernel]:
        """The loaded kernels in launch order (register and local-memory counts are on them)."""
        return [k for k, *_ in self._launches]

    def launch(self, q_ptr: int, dqdt_ptr: int) -> None:
        p = self.problem
        fstar = self.fstar.ptr if self.fstar is not None else 0
        ne = p.num_elements
        u, v, w = p.ptr("u"), p.ptr("v"), p.ptr("w")
        faces = (p.ptr("nx"), p.ptr("ny"), p.ptr("nz"), p.ptr("F"))
        for kernel, grid, block, smem, face in self._launches:
            if face:
                args: tuple[Any, ...] = (q_ptr, u, v, w, self.vmap_m.ptr, self.vmap_p.ptr, *faces, fstar, ne)
            else:
                args = (q_ptr, u, v, w, p.ptr("Ex"), p.ptr("Ey"), p.ptr("Ez"), self.vmap_m.ptr, self.vmap_p.ptr,
                        *faces, fstar, self.diff.ptr, dqdt_ptr, ne)
            kernel.launch(grid, block, args, smem, p.stream)

    def close(self) -> None:
        for module in self._modules:
            module.close()
        self._modules.clear()
        self._launches.clear()


def _variant_path(variant: str, doc: str) -> type[FusedPathBase]:
    """One Path class per variant: the variants differ only in name, orders and template switch."""
    return type(f"{variant.title().replace('_', '')}Path", (FusedPathBase,),
                {"__doc__": doc, "__module__": __name__, "name": variant, "variant": variant,
                 "orders": SUPPORTED_ORDERS[variant]})


FusedPath = _variant_path("FUSED", "FUSED: contractions as length-Nq inner products on the CUDA cores.")
FusedTcPath = _variant_path("FUSED_TC", "FUSED_TC: contractions with mma.sync m8n8k4 (the paper's fused "
                            "tensor-core path).")
FusedDfmaPath = _variant_path("FUSED_DFMA", "FUSED_DFMA: FUSED_TC's schedule with DFMA in place of each DMMA "
                              "(the instruction ablation).")
FusedTc16Path = _variant_path("FUSED_TC16", "FUSED_TC16: the Hopper-native build on m16n8k4 / m16n8k8 (sm_90 "
                              "and newer only).")
