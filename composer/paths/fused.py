"""The fused element-local paths FUSED, FUSED_TC, FUSED_DFMA and FUSED_TC16 as ``Path`` objects.

One class does the work; the four registered subclasses only name the variant, so the four
paths launch identically and differ only in what the builder renders for them.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, ClassVar

from composer import counts
from composer.arch.mma import mma_shape
from composer.config.schedules import available_orders, load_schedule
from composer.fused.builder import FusedBuild, build, d_panel_layout, prebuilt
from composer.fused.config import ALLOWED_MMA, SUPPORTED_ORDERS, FusedConfig, fused_config, table_variant
from composer.paths.base import Path, PathOption, directory_option
from composer.paths.problem import DeviceProblem
from composer.runtime.manifest import requested_build_dir
from composer.runtime.module import Kernel, Module

FACE_BLOCKS_PER_SM = 16  # grid cap of the grid-stride face kernel
# Without a schedule table to read (an order the variant lacks, or no table for it), the memory
# estimate follows the paper: fstar stays on chip at low order and, from this order up, a separate
# face kernel stores it as a face array.
FACE_FLUX_ARRAY_MIN_ORDER = 63


def _prefer_shared_carveout(kernel: Kernel) -> None:
    """min_blocks >= 2: ask for the largest shared-memory carveout, so that the driver's L1/shared
    split never caps the blocks per SM below the min_blocks the kernel was compiled for."""
    from composer.runtime.errors import check

    drv = kernel.device._drv
    attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
    check(drv.cuFuncSetAttribute(kernel.function, attr, 100), "cuFuncSetAttribute(carveout)")


def fused_config_option(value: FusedConfig) -> FusedConfig:
    """A FusedConfig given as the ``config`` option (from Python: a sweep's candidate)."""
    if not isinstance(value, FusedConfig):
        raise TypeError(f"expected a FusedConfig (from Python, e.g. a sweep candidate), got {type(value).__name__}")
    return value


class FusedPathBase(Path):
    """Launch the fused kernels of ``variant`` for the problem's order on its device."""

    variant: ClassVar[str]
    family = "fused"
    build_kinds = frozenset({"fused"})
    options = MappingProxyType({
        "config": PathOption(fused_config_option, "a FusedConfig overriding the schedule's table"),
        "cache_dir": PathOption(directory_option, "the NVRTC cache directory (default: "
                                                  "$COMPOSER_CACHE_DIR/nvrtc, else ~/.cache/composer/nvrtc)"),
        "build_dir": PathOption(directory_option, "a `composer build` directory to load the kernels from "
                                                  "(default: $COMPOSER_BUILD_DIR; else NVRTC compiles them)"),
    })

    @classmethod
    def face_flux_array(cls, order: int) -> bool:
        """Whether the path stores the face flux in a face array at ``order`` (its schedule's
        ``flux = "array"``); a table that exists but does not parse raises its ConfigError."""
        if order not in cls.orders or order not in available_orders():
            return order >= FACE_FLUX_ARRAY_MIN_ORDER
        schedule = load_schedule(order)
        if table_variant(cls.variant) not in schedule.paths:
            return order >= FACE_FLUX_ARRAY_MIN_ORDER
        return fused_config(cls.variant, order, schedule.paths, schedule.file).flux == "array"

    @classmethod
    def workspace_items(cls, order: int, grid: counts.Grid) -> tuple[counts.MemoryItem, ...]:
        items = [counts.MemoryItem("index maps (32-bit)", 2, counts.face_array_bytes(order, grid, counts.INT32),
                                   "vmapM, vmapP as int32: the fused kernels' copies")]
        if cls.face_flux_array(order):
            items.append(counts.MemoryItem("face flux", 1, counts.face_array_bytes(order, grid),
                                           "fstar stored by a separate face kernel (the schedule's flux = \"array\")"))
        return tuple(items)

    def __init__(self, problem: DeviceProblem, **options: Any) -> None:
        super().__init__(problem, **options)
        config: FusedConfig = self.options.get("config") or fused_config(self.variant, problem.order)
        self.config = config
        # kernels cross-compiled by `composer build --paths ...` when the build directory holds all of
        # them from this very source; else NVRTC (disk-cached)
        build_dir = requested_build_dir(self.options.get("build_dir"))
        ready = prebuilt(config, problem.device.arch, build_dir) if build_dir else None
        self.prebuilt = ready is not None
        self.build: FusedBuild = ready or build(config, problem.device.arch, self.options.get("cache_dir"))
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
    """One Path class per variant: the variants differ only in name, orders, lowest architecture
    (that of the MMA shapes its tables may use) and template switch."""
    shapes = ALLOWED_MMA.get(variant, ())
    return type(f"{variant.title().replace('_', '')}Path", (FusedPathBase,),
                {"__doc__": doc, "__module__": __name__, "name": variant, "variant": variant,
                 "orders": SUPPORTED_ORDERS[variant],
                 "min_sm": min(mma_shape(s).min_sm for s in shapes) if shapes else None})


FusedPath = _variant_path("FUSED", "FUSED: contractions as length-Nq inner products on the CUDA cores.")
FusedTcPath = _variant_path("FUSED_TC", "FUSED_TC: contractions with mma.sync m8n8k4 (the paper's fused "
                            "tensor-core path).")
FusedDfmaPath = _variant_path("FUSED_DFMA", "FUSED_DFMA: FUSED_TC's schedule with DFMA in place of each DMMA "
                              "(the instruction ablation).")
FusedTc16Path = _variant_path("FUSED_TC16", "FUSED_TC16: the Hopper-native build on m16n8k4 / m16n8k8 (sm_90 "
                              "and newer only).")
