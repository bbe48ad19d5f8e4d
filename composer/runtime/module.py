"""Loading CUBINs (cuModuleLoadData) and launching their kernels with validated, typed arguments."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .device import Device, ensure_context
from .errors import LaunchError, check
from .manifest import KernelEntry
from .params import BLOCK_LIMITS, GRID_LIMITS, PORTABLE_CLUSTER_BLOCKS, PackedArgs, Param, cluster_dims, dim3

STATIC_SMEM_LIMIT = 48 * 1024  # above this, dynamic shared memory must be opted into per function


class Module:
    """A loaded CUBIN; kernels obtained from it stay valid while the module lives."""

    def __init__(self, handle: Any, device: Device, image: bytes, entry: KernelEntry | None = None) -> None:
        self.handle = handle
        self.device = device
        self._image = image  # the driver may read the image lazily: keep it alive
        self.entry = entry

    @classmethod
    def from_cubin(cls, image: bytes, device: Device | None = None) -> Module:
        """Load a CUBIN image into the device's primary context."""
        dev = ensure_context(device)
        handle = check(dev._drv.cuModuleLoadData(image), "cuModuleLoadData")
        return cls(handle, dev, image)

    @classmethod
    def from_file(cls, path: Path | str, device: Device | None = None) -> Module:
        """Load a CUBIN file."""
        return cls.from_cubin(Path(path).read_bytes(), device)

    @classmethod
    def from_manifest_entry(cls, entry: KernelEntry, base_dir: Path | str | None = None,
                            device: Device | None = None) -> Module:
        """Load the CUBIN of a manifest entry after re-checking its sha256; see ``entry_kernel``."""
        if base_dir is not None:
            from .manifest import with_base_dir
            entry = with_base_dir(entry, base_dir)
        entry.verify()
        mod = cls.from_cubin(entry.cubin_path.read_bytes(), device)
        mod.entry = entry
        return mod

    def get_kernel(self, symbol: str, params: Sequence[Param] | None = None,
                   block: Sequence[int] | int | None = None, dynamic_smem: int = 0) -> Kernel:
        """cuModuleGetFunction; ``params`` enables argument validation, ``block`` a default block."""
        self.device.make_current()
        fn = check(self._drv_get_function(symbol), f"cuModuleGetFunction({symbol})")
        return Kernel(self, fn, symbol, params, block, dynamic_smem)

    def _drv_get_function(self, symbol: str) -> tuple:
        return self.device._drv.cuModuleGetFunction(self.handle, symbol.encode())

    def entry_kernel(self) -> Kernel:
        """The manifest entry's kernel with its params, block and dynamic shared memory preset."""
        if self.entry is None:
            raise LaunchError("module was not loaded from a manifest entry")
        e = self.entry
        return self.get_kernel(e.symbol, e.params, e.block, e.dynamic_smem)

    def close(self) -> None:
        """cuModuleUnload (idempotent); kernels of this module become invalid."""
        h, self.handle = self.handle, None
        if h is not None:
            self.device.make_current()
            check(self.device._drv.cuModuleUnload(h), "cuModuleUnload")

    def __del__(self) -> None:
        if getattr(self, "handle", None) is not None and not sys.is_finalizing():
            with contextlib.suppress(Exception):  # a finalizer must never raise
                self.close()


class Kernel:
    """A ``__global__`` function; ``launch`` packs arguments per ``params`` and checks geometry."""

    def __init__(self, module: Module, function: Any, name: str, params: Sequence[Param] | None,
                 block: Sequence[int] | int | None, dynamic_smem: int) -> None:
        self.module = module
        self.device = module.device
        self.function = function
        self.name = name
        self.params = tuple(params) if params is not None else None
        self.block = dim3(block, f"{name} block", BLOCK_LIMITS) if block is not None else None
        self.dynamic_smem = int(dynamic_smem)
        # without an opt-in a block may use 48 KiB of shared memory in all, static and dynamic together
        self._smem_optin = STATIC_SMEM_LIMIT - self.static_smem
        if self.dynamic_smem > self._smem_optin:
            self.set_max_dynamic_smem(self.dynamic_smem)

    def _attr(self, name: str) -> int:
        drv = self.device._drv
        return int(check(drv.cuFuncGetAttribute(getattr(drv.CUfunction_attribute, name), self.function),
                         f"cuFuncGetAttribute({name})"))

    @property
    def num_regs(self) -> int:
        """Registers per thread."""
        return self._attr("CU_FUNC_ATTRIBUTE_NUM_REGS")

    @property
    def local_bytes(self) -> int:
        """Local memory per thread (register spills, stack arrays)."""
        return self._attr("CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES")

    @property
    def max_threads(self) -> int:
        """Largest block this function can be launched with (registers permitting)."""
        return self._attr("CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK")

    @property
    def static_smem(self) -> int:
        """Statically declared shared memory in bytes."""
        return self._attr("CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES")

    def resident_blocks(self, threads: int, dynamic_smem: int | None = None) -> int:
        """Blocks of ``threads`` threads one SM holds at once (the occupancy calculator): what the
        scheduler's contention estimate divides a kernel's grid by."""
        smem = self.dynamic_smem if dynamic_smem is None else int(dynamic_smem)
        return int(check(self.device._drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(self.function, int(threads), smem),
                         f"cuOccupancyMaxActiveBlocksPerMultiprocessor({self.name})"))

    def set_max_dynamic_smem(self, nbytes: int) -> None:
        """Opt in to dynamic shared memory that with the kernel's static shared memory exceeds 48 KiB (no-op
        below that)."""
        if nbytes + self.static_smem <= STATIC_SMEM_LIMIT:
            return
        limit = self.device.max_smem_optin - self.static_smem
        if nbytes > limit:
            raise LaunchError(f"{self.name}: {nbytes} bytes of dynamic shared memory exceed the device "
                              f"opt-in limit of {limit} bytes")
        drv = self.device._drv
        attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        check(drv.cuFuncSetAttribute(self.function, attr, nbytes), "cuFuncSetAttribute")
        self._smem_optin = max(self._smem_optin, nbytes)

    def set_preferred_carveout(self, percent: int) -> None:
        """The preferred shared-memory carveout, percent of the largest (-1: no preference, the default): a
        hint that sizes the SM's L1/shared split for this function (composer.arch.limits.carveout_capacity)."""
        drv = self.device._drv
        attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
        check(drv.cuFuncSetAttribute(self.function, attr, int(percent)), f"cuFuncSetAttribute({self.name}, carveout)")

    def launch(self, grid: Sequence[int] | int, block: Sequence[int] | int | None = None,
               args: Sequence[Any] = (), shared: int | None = None, stream: Any = None,
               cluster: Sequence[int] | int | None = None) -> None:
        """cuLaunchKernel with arguments validated against ``params`` (required for packing);
        with ``cluster``, cuLaunchKernelEx with that thread-block cluster shape (sm_90+; the
        blocks of a cluster share their shared memory, ``composer.runtime.cluster``)."""
        if self.params is None:
            raise LaunchError(f"{self.name}: parameter list unknown; pass params= to get_kernel")
        g = dim3(grid, f"{self.name} grid", GRID_LIMITS)
        block_src = block if block is not None else self.block
        if block_src is None:
            raise LaunchError(f"{self.name}: no block given and no default block")
        b = dim3(block_src, f"{self.name} block", BLOCK_LIMITS)
        if b[0] * b[1] * b[2] > 1024:
            raise LaunchError(f"{self.name}: block {b} has more than 1024 threads")
        smem = self.dynamic_smem if shared is None else int(shared)
        if smem > self._smem_optin:
            self.set_max_dynamic_smem(smem)
        packed = PackedArgs(self.params, args)
        h = 0 if stream is None else getattr(stream, "handle", stream)
        self.device.make_current()
        if cluster is not None and cluster_dims(cluster, g, 1 << 30, f"{self.name} cluster") == (1, 1, 1):
            cluster = None  # a cluster of one block is a plain launch (and runs on every arch)
        if cluster is None:
            check(self.device._drv.cuLaunchKernel(self.function, *g, *b, smem, h, packed.address, 0),
                  f"cuLaunchKernel({self.name})")
            return
        self._launch_cluster(g, b, smem, h, packed, cluster)

    def _launch_cluster(self, g: tuple[int, int, int], b: tuple[int, int, int], smem: int, stream: Any,
                        packed: PackedArgs, cluster: Sequence[int] | int) -> None:
        from composer.arch.limits import arch_limits

        drv = self.device._drv
        c = cluster_dims(cluster, g, arch_limits(self.device.arch).max_cluster_blocks, f"{self.name} cluster")
        if c[0] * c[1] * c[2] > PORTABLE_CLUSTER_BLOCKS:
            check(drv.cuFuncSetAttribute(self.function,
                                         drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                  f"cuFuncSetAttribute({self.name}, non-portable cluster size)")
        attr = drv.CUlaunchAttribute()
        attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = c
        config = drv.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = g
        config.blockDimX, config.blockDimY, config.blockDimZ = b
        config.sharedMemBytes = smem
        config.hStream = stream
        config.attrs = [attr]
        config.numAttrs = 1
        check(drv.cuLaunchKernelEx(config, self.function, packed.address, 0), f"cuLaunchKernelEx({self.name})")

    def __repr__(self) -> str:
        return f"Kernel({self.name!r}, params={len(self.params or ())})"
