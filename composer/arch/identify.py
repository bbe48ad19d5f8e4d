"""Which entry of the machine table a GPU is, from what the GPU says about itself.

Why not by name: the table's entries are named by the lab (``h200``), the driver names the board
(``NVIDIA H200``), and a board name does not say which memory size or SM count a variant has. The
architecture, the SM count and the device memory do: an entry matches when its architecture and
SM count are the GPU's and its memory is within ``MEMORY_TOLERANCE`` of the GPU's (the table gives
the usable GiB the datasheet or the device query states; the driver reports a little less or more).
"""

from __future__ import annotations

from collections.abc import Mapping

from composer.arch.machines import Machine, load_machines

#: Relative difference between the table's memory and the device's allowed for a match.
MEMORY_TOLERANCE = 0.10


def matches(machine: Machine, arch: str, sm_count: int, memory_bytes: int) -> bool:
    """Whether ``machine`` describes a GPU of ``arch`` with ``sm_count`` SMs and ``memory_bytes``."""
    if machine.arch != arch or machine.sm_count != sm_count or memory_bytes <= 0:
        return False
    return abs(machine.memory_bytes - memory_bytes) <= MEMORY_TOLERANCE * memory_bytes


def identify_machine(arch: str, sm_count: int, memory_bytes: int,
                     machines: Mapping[str, Machine] | None = None) -> Machine | None:
    """The one table entry that matches the GPU (the closest in memory when several do); None when
    none does."""
    table = machines if machines is not None else load_machines()
    found = [m for m in table.values() if matches(m, arch, sm_count, memory_bytes)]
    if not found:
        return None
    return min(found, key=lambda m: (abs(m.memory_bytes - memory_bytes), m.name))


__all__ = ["MEMORY_TOLERANCE", "identify_machine", "matches"]
