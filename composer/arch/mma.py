"""The FP64 tensor-core (DMMA) instruction shapes: fragments, supported architectures and the SASS
each one becomes, as measured (``shared/notes/cute-dsl-fp64.md``).

Pure Python and import-light: the SASS inspector, ``composer build`` and the kernel generator all
consult this one table, so "which shape runs where and how it must look in SASS" is stated once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from composer.errors import ComposerError

_ARCH = re.compile(r"^sm_(\d{2,3})[af]?$")


@dataclass(frozen=True)
class MmaShape:
    """One ``mma.sync.aligned.m{M}n{N}k{K}.row.col.f64`` shape and its per-thread fragment sizes."""

    m: int
    n: int
    k: int
    a_regs: int  # doubles of A per thread
    b_regs: int
    c_regs: int
    min_sm: int  # lowest architecture whose ptxas accepts it

    @property
    def name(self) -> str:
        """The spelling used on the command line and in schedules: ``16x8x4``."""
        return f"{self.m}x{self.n}x{self.k}"

    @property
    def ptx(self) -> str:
        """The PTX shape token: ``m16n8k4``."""
        return f"m{self.m}n{self.n}k{self.k}"

    @property
    def flop(self) -> int:
        """FLOP of one warp-wide instruction."""
        return 2 * self.m * self.n * self.k

    @property
    def base_multiple(self) -> int:
        """How many m8n8k4 the shape is (the sm_100 SASS expansion factor)."""
        return (self.m * self.n * self.k) // (8 * 8 * 4)


SHAPES: dict[str, MmaShape] = {
    s.name: s
    for s in (
        MmaShape(8, 8, 4, 1, 1, 2, 80),
        MmaShape(16, 8, 4, 2, 1, 4, 90),
        MmaShape(16, 8, 8, 4, 2, 4, 90),
        MmaShape(16, 8, 16, 8, 4, 4, 90),
    )
}


def arch_number(arch: str) -> int:
    """``sm_90a`` -> 90; ValueError for anything that is not a real SASS target."""
    match = _ARCH.match(arch)
    if not match:
        raise ValueError(f"arch must look like 'sm_90' or 'sm_90a', got {arch!r}")
    return int(match.group(1))


def mma_shape(name: str) -> MmaShape:
    """Look a shape up by ``16x8x4`` or ``m16n8k4`` spelling."""
    key = name.strip().lower()
    match = re.fullmatch(r"m(\d+)n(\d+)k(\d+)", key)
    if match:
        key = "x".join(match.groups())
    if key not in SHAPES:
        raise ValueError(f"unknown FP64 MMA shape {name!r}; expected one of {', '.join(SHAPES)}")
    return SHAPES[key]


class UnsupportedShapeError(ComposerError, ValueError):
    """A DMMA shape the target architecture does not have (wide shapes before sm_90)."""


def check_supported(shape: MmaShape | str, arch: str) -> MmaShape:
    """Raise UnsupportedShapeError if ``arch`` cannot issue ``shape`` (ptxas would refuse it)."""
    s = mma_shape(shape) if isinstance(shape, str) else shape
    sm = arch_number(arch)
    if sm < 80:
        raise UnsupportedShapeError(f"{arch} has no FP64 tensor cores (DMMA needs sm_80 or newer)")
    if sm < s.min_sm:
        raise UnsupportedShapeError(
            f"mma {s.name} ({s.ptx}) needs sm_{s.min_sm} or newer; {arch} has only 8x8x4 "
            f"(ptxas: 'requires .target sm_{s.min_sm}'); use --mma 8x8x4 for {arch}")
    return s


def expected_sass(shape: MmaShape | str, arch: str) -> tuple[str, int]:
    """(normalized SASS DMMA shape, SASS instructions per PTX mma) on ``arch``.

    sm_80 and sm_90 issue the shape natively; sm_100 splits every wide shape into m8n8k4 steps
    (the paper's S7.3 observation, measured with cuobjdump 13.5).
    """
    s = check_supported(shape, arch)
    if arch_number(arch) >= 100:
        return "8x8x4", s.base_multiple
    return s.name, 1
