"""Per-architecture SM and thread-block limits (``composer/arch/archs.toml``), loaded and checked.

Why: the generators and the candidate filters size shared memory, threads and registers against
the architecture they build for; a limit written as a literal in each of them was the sm_90 one
applied to every target (227 KiB on sm_80, which has 163 KiB). One table, one loader, one error.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from composer.arch.mma import arch_number
from composer.config.fields import Expected, Table, positive_int, read_toml, string
from composer.errors import ComposerError

ARCHS_FILE = Path(__file__).resolve().with_name("archs.toml")
#: The architecture builds default to: the lab machine's (``machines.h200.arch``), the one the
#: shipped schedules were measured and tuned on.
DEFAULT_ARCH = "sm_90"
KIB = 1024
_SMEM_KEYS = ("smem_per_sm", "smem_per_block_optin", "smem_reserved_per_block", "smem_static_per_block")
_COUNT_KEYS = ("registers_per_sm", "registers_per_block", "max_registers_per_thread", "max_threads_per_block",
               "max_threads_per_sm", "max_blocks_per_sm", "warp_size", "max_cluster_blocks")


class UnknownArchError(ComposerError, ValueError):
    """An architecture the limits table has no entry for (the message lists the known ones)."""


@dataclass(frozen=True)
class ArchLimits:
    """What one SM and one thread block of an architecture can hold; shared memory in bytes."""

    arch: str
    description: str
    compute_capability: str
    smem_per_sm: int
    smem_per_block_optin: int  # dynamic + static, after cudaFuncSetAttribute opt-in
    smem_reserved_per_block: int  # taken by CUDA from the SM for every resident block
    smem_static_per_block: int  # the most a block gets without opting in
    registers_per_sm: int  # 32-bit registers
    registers_per_block: int
    max_registers_per_thread: int
    max_threads_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    warp_size: int
    max_cluster_blocks: int  # blocks of one thread-block cluster (1: no clusters), non-portable maximum
    smem_carveouts: tuple[int, ...] = ()  # the shared-memory capacities the L1/shared store splits into
    l1_shared_per_sm: int = 0  # the unified L1/shared store: L1 is what the carveout leaves of it

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size

    def carveout_capacity(self, percent: int) -> int:
        """The shared memory per SM a preferred carveout of ``percent`` (of ``smem_per_sm``) gives: the
        smallest supported capacity at or above that share (the guide's rounding; the driver takes it
        as a hint). Why: at p = 7 the fused kernels are bound by the L2 and its partition link, and
        the carveout is the one knob that trades resident blocks for L1 that can catch their reuse."""
        if not 0 <= percent <= 100:
            raise ValueError(f"a carveout is a percentage 0 ... 100, got {percent}")
        want = self.smem_per_sm * percent / 100
        return next(c for c in self.smem_carveouts if c >= want)

    def smem_per_block(self, blocks_per_sm: int = 1) -> int:
        """Shared memory one block may use so that ``blocks_per_sm`` blocks still share an SM
        (each of them costs the reserved 1 KiB on top of its own)."""
        if blocks_per_sm <= 1:
            return self.smem_per_block_optin
        return min(self.smem_per_block_optin, self.smem_per_sm // blocks_per_sm - self.smem_reserved_per_block)


def resident_blocks(limits: ArchLimits, threads: int, smem_bytes: int, registers: int = 0,
                    smem_capacity: int | None = None) -> int:
    """Blocks of ``threads`` threads one SM of ``limits`` holds at once by the occupancy rules, from
    the block's shared memory and (when known, else only the other limits bind) its registers per
    thread, allocated per warp in units of 256: the grid of a persistent kernel built without a GPU
    to ask (``cuOccupancyMaxActiveBlocksPerMultiprocessor`` where one is). ``smem_capacity``: the
    shared memory of the SM's carveout (``ArchLimits.carveout_capacity``) instead of the largest."""
    warps = -(-threads // limits.warp_size)
    bound = min(limits.max_blocks_per_sm, limits.max_threads_per_sm // (warps * limits.warp_size))
    if smem_bytes:
        capacity = limits.smem_per_sm if smem_capacity is None else smem_capacity
        bound = min(bound, capacity // (smem_bytes + limits.smem_reserved_per_block))
    if registers:
        per_warp = -(-registers * limits.warp_size // 256) * 256
        bound = min(bound, limits.registers_per_sm // (per_warp * warps))
    return max(bound, 0)


def arch_limits(arch: str) -> ArchLimits:
    """Limits of ``arch`` (``sm_90``; a feature suffix as in ``sm_90a`` shares its base's limits).

    ValueError for a malformed name, UnknownArchError (a ComposerError) listing the known
    architectures for a well-formed one without an entry."""
    key = f"sm_{arch_number(arch)}"
    table = load_arch_limits()
    if key not in table:
        raise UnknownArchError(f"no SM limits for {arch!r}; known architectures: {', '.join(table)} "
                               f"({ARCHS_FILE.name})")
    return table[key]


@functools.lru_cache(maxsize=None)
def load_arch_limits(path: Path = ARCHS_FILE) -> dict[str, ArchLimits]:
    """Every entry of the limits file, checked, in architecture order (cached: the file ships)."""
    file = path.name
    top = Table(read_toml(path, file), file)
    archs = top.table("archs")
    top.reject_unknown()
    out = {name: _parse(name, archs.table(name)) for name in archs.data}
    return dict(sorted(out.items(), key=lambda item: arch_number(item[0])))


def _parse(name: str, table: Table) -> ArchLimits:
    if not re.fullmatch(r"sm_\d{2,3}", name):
        raise table.error("", "architecture names look like 'sm_90' (no feature suffix)")
    values: dict[str, Any] = {key: KIB * table.required(f"{key}_kib", positive_int) for key in _SMEM_KEYS}
    values.update({key: table.required(key, positive_int) for key in _COUNT_KEYS})
    carveouts = tuple(KIB * int(c) for c in table.required("smem_carveouts_kib", _carveouts))
    limits = ArchLimits(arch=name, description=table.required("description", string),
                        compute_capability=table.required("compute_capability", _capability), **values,
                        smem_carveouts=carveouts, l1_shared_per_sm=KIB * table.required("l1_shared_per_sm_kib", positive_int))
    table.reject_unknown()
    _check(limits, table)
    return limits


def _check(limits: ArchLimits, table: Table) -> None:
    """The relations between the limits that the guides' tables satisfy (catches typos)."""
    major, minor = limits.compute_capability.split(".")
    problems = []
    if f"sm_{major}{minor}" != limits.arch:
        problems.append(f"compute_capability {limits.compute_capability} is not {limits.arch}")
    if limits.smem_per_block_optin + limits.smem_reserved_per_block > limits.smem_per_sm:
        problems.append("smem_per_block_optin_kib + smem_reserved_per_block_kib exceed smem_per_sm_kib")
    if limits.smem_static_per_block > limits.smem_per_block_optin:
        problems.append("smem_static_per_block_kib exceeds smem_per_block_optin_kib")
    if limits.max_threads_per_block > limits.max_threads_per_sm:
        problems.append("max_threads_per_block exceeds max_threads_per_sm")
    if limits.max_threads_per_block % limits.warp_size or limits.max_threads_per_sm % limits.warp_size:
        problems.append("thread limits are not whole warps")
    if limits.registers_per_block > limits.registers_per_sm:
        problems.append("registers_per_block exceeds registers_per_sm")
    if limits.smem_carveouts[-1] != limits.smem_per_sm:
        problems.append("the largest of smem_carveouts_kib is not smem_per_sm_kib")
    if limits.l1_shared_per_sm < limits.smem_per_sm:
        problems.append("l1_shared_per_sm_kib is below smem_per_sm_kib")
    if problems:
        raise table.error("", "; ".join(problems))


def _carveouts(value: Any) -> list[int]:
    if (isinstance(value, list) and value and all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in value)
            and value[0] == 0 and all(a < b for a, b in zip(value, value[1:]))):
        return value
    raise Expected("an ascending list of KiB capacities from 0, like [0, 8, 16, 32, 64, 100]")


def _capability(value: Any) -> str:
    if isinstance(value, str) and re.fullmatch(r"\d+\.\d", value):
        return value
    raise Expected("a compute capability string like '9.0'")


__all__ = ["ARCHS_FILE", "DEFAULT_ARCH", "ArchLimits", "UnknownArchError", "arch_limits", "load_arch_limits"]
