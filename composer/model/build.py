"""A cross-compiled build (``composer build --out DIR``) as the model reads it: which of our
kernels exist for the target and the DMMA shapes their SASS issues.

The shapes come from the disassembly (``composer.arch.sass``), not from the build options: that is
what the target executes (sm_100 turns one 16x8x4 mma into two DMMA.8x8x4). Disassembly is lazy
and per CUBIN, so a prediction inspects only the kernels it needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from composer.arch.mma import arch_number
from composer.arch.sass import KernelSass, inspect_cubin
from composer.model.errors import KernelListMismatch
from composer.model.kernels import KernelIdentity, identify
from composer.runtime.manifest import KernelEntry, read_manifest

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class BuiltKernel:
    """One kernel of a build: its identity, manifest entry and the PTX shape it was built with."""

    identity: KernelIdentity
    entry: KernelEntry

    @property
    def threads(self) -> int:
        """Threads per block of its launch."""
        count = 1
        for extent in self.entry.block:
            count *= int(extent)
        return count

    @property
    def mma(self) -> str | None:
        """The PTX MMA shape of its build configuration, when it has one."""
        value = self.entry.config.get("mma")
        return str(value) if value else None


class Build:
    """The kernels of one build directory, all for one architecture."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        if not (self.directory / MANIFEST).is_file():
            raise KernelListMismatch(f"{self.directory}: no {MANIFEST}; cross-compile one with "
                                     "`composer build --arch ARCH --paths ... --out DIR`")
        entries = read_manifest(self.directory / MANIFEST)
        archs = {e.arch for e in entries}
        if len(archs) != 1:
            raise KernelListMismatch(f"{self.directory}: kernels of {len(archs)} architectures "
                                     f"({', '.join(sorted(archs)) or 'none'}); predict from a build of one")
        self.arch = archs.pop()
        self.kernels = [BuiltKernel(identify(e.symbol), e) for e in entries]
        self._sass: dict[Path, dict[str, KernelSass]] = {}

    def check_arch(self, machine_arch: str) -> None:
        """The build must target the machine's architecture family (sm_90a serves sm_90)."""
        if arch_number(self.arch) != arch_number(machine_arch):
            raise KernelListMismatch(f"{self.directory}: built for {self.arch}, the machine is {machine_arch}")

    def find(self, key: tuple[str, int | None, str, str], mma: str | None = None) -> BuiltKernel | None:
        """The build kernel with identity key ``key`` (``KernelIdentity.build_key``); ``mma`` picks
        among CuTe GEMMs built at several shapes into one directory."""
        found = [k for k in self.kernels if k.identity.build_key() == key]
        if mma is not None and len(found) > 1:
            found = [k for k in found if k.mma == mma]
        if len(found) > 1:
            names = ", ".join(k.entry.symbol for k in found)
            raise KernelListMismatch(f"{self.directory}: several kernels fit one role ({names}); "
                                     "pass --mma SHAPE to choose the build shape")
        return found[0] if found else None

    def sass(self, kernel: BuiltKernel) -> KernelSass:
        """The SASS summary of ``kernel`` (cuobjdump, once per CUBIN)."""
        path = kernel.entry.cubin_path
        if path not in self._sass:
            self._sass[path] = inspect_cubin(path)
        sass = self._sass[path]
        symbol = kernel.entry.symbol
        if symbol not in sass:
            raise KernelListMismatch(f"{path}: the SASS has no function {symbol}")
        return sass[symbol]

    def dmma(self, kernel: BuiltKernel) -> dict[str, int]:
        """Static DMMA instructions per SASS shape of ``kernel`` (cuobjdump)."""
        return dict(self.sass(kernel).dmma)

    def blocks_per_sm(self, kernel: BuiltKernel) -> int:
        """Blocks of ``kernel`` one SM holds by its threads, registers and shared memory."""
        from composer.arch.limits import arch_limits, resident_blocks

        sass = self.sass(kernel)
        smem = int(kernel.entry.dynamic_smem or 0) + sass.shared_bytes
        return resident_blocks(arch_limits(self.arch), kernel.threads, smem, sass.registers)

    def spill_bytes(self, kernel: BuiltKernel) -> int:
        """Per-thread local memory of ``kernel`` (where ptxas spills)."""
        return self.sass(kernel).spill_bytes
