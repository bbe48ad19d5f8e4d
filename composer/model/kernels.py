"""Which kernel a profiled or built name is: its kind, its role in a path, and the MMA it issues.

Why from the name: a prediction carries every kernel of the calibration's kernel list to the
target and needs, per kernel, its counterpart in a cross-compiled build (the same role compiled
for another shape or machine) and whether it issues mma at all. The profiler's tensor counter is
not trusted for that (paper §6.3, S7: on A100 it reports tensor instructions for kernels without
mma), so the instruction class is fixed by the kernel: our own kernels by their generated names,
cuBLAS kernels by the ``tensorMxNxK`` token their names carry, or the CUTLASS ``tensorop_d884gemm``
token of the CUTLASS kernels cuBLAS dispatches (a library kernel with neither is a SIMT kernel).

Kinds: ``cute_gemm`` (``dgemm_p0511_x_m16_8_4_0``; GEMM_FUSED's ``dgemm_p0511_z_m8_8_4_carry_0``
has the role ``z_carry``, with the flux formed in the mainloop ``_qv`` and a swept carrier tile
``_t64x64x16w2x2s4`` in the role too: ``y_carry_qv_t64x64x16w2x2s4``, with an epilogue prefetch
``_t128x64x16w2x2s3e16s``, a staggered start ``_t128x64x16w2x2s3st50``), ``fused`` (``fused_tc16_p511_s0_x``),
``face`` (``fused_face_flux_nq512``), ``support`` (``volume_flux_nq512``, ...) and ``library``
(anything else: vendor kernels, chosen by the library at run time, priced by Equation 8).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from composer.arch.mma import expected_sass, mma_shape
from composer.model.errors import ModelError

# GEMM_CUTE's GEMMs, and GEMM_FUSED's with its epilogue variant (the carrier, a folding x/y GEMM)
_CUTE = re.compile(r"^dgemm_p(\d{4})_([xyz])_m(\d+)_(\d+)_(\d+)(?:_(carry_fold|carry|fold))?(_q[vs])?"
                   r"(_t\d+x\d+x\d+w\d+x\d+s\d+t?(?:e\d+s?)?(?:g\d+)?(?:fp)?(?:ae\d+(?:b\d)?)?(?:mb\d)?(?:st\d+)?)?(?:_\d+)?$")
_OWN_PREFIXES = ("dgemm_p", "fused_")
_FUSED = re.compile(r"^(fused(?:_[a-z0-9]+)?)_p(\d+)_([sk]\d+_[xyz]+)$")
_FACE = re.compile(r"^fused_face_flux_nq(\d+)$")
#: the support kernels a ``composer build`` holds. The overlapped flux's products (``volume_products_xy_nq512``,
#: composer.paths.overlap) are compiled at run time and no build holds them: they stay "library" kernels
#: (SIMT, priced from their own counters), which the build lookup of the project's kernels would report missing
_SUPPORT = re.compile(r"^(volume_flux|surface_flux|separable_lift|rk3_stage)_nq(\d+)$")
_LIBRARY_TENSOR = re.compile(r"tensor(\d+)x(\d+)x(\d+)")
#: CUTLASS kernels cuBLAS dispatches name their FP64 MMA in the operation token:
#: ``cutlass_80_tensorop_d884gemm_64x64_16x4_nn_align1`` (m8n8k4; seen at p = 63 on the H200).
_CUTLASS_TENSOROP = re.compile(r"tensorop_d(?:(\d+)x(\d+)x(\d+)|(8)(8)(4))gemm")
#: Fused variants whose kernels issue no mma (CUDA cores: FUSED, and FUSED_DFMA's DFMA schedule).
_SIMT_FUSED = ("fused", "fused_dfma")


@dataclass(frozen=True)
class KernelIdentity:
    """What a kernel name says.

    ``order`` is None for library kernels (their names do not carry it); ``variant`` is the
    fused path prefix (``fused_tc``) for fused volume kernels, "" otherwise; ``named_shape`` the
    PTX MMA shape the name states (``16x8x4``), None when it states none; ``issues_mma`` whether
    the kernel's instruction class includes DMMA (None: only its SASS can tell).
    """

    name: str
    kind: str
    order: int | None
    variant: str
    role: str
    named_shape: str | None
    issues_mma: bool | None

    @property
    def own(self) -> bool:
        """Compiled by this project (a cross-compiled build holds it), not chosen by a library."""
        return self.kind != "library"

    def build_key(self, variant: str | None = None) -> tuple[str, int | None, str, str]:
        """The key its counterpart in a build has; ``variant`` substitutes the fused prefix (to
        find FUSED_TC16's kernel for a FUSED_TC calibration kernel)."""
        return (self.kind, self.order, variant if variant is not None and self.variant else self.variant,
                self.role)


def identify(name: str) -> KernelIdentity:
    """The identity of a kernel name (a profiled ``Kernel Name`` or a build entry's symbol)."""
    if m := _CUTE.match(name):
        shape = f"{m.group(3)}x{m.group(4)}x{m.group(5)}"
        role = m.group(2) + (f"_{m.group(6)}" if m.group(6) else "") + (m.group(7) or "") + (m.group(8) or "")
        return KernelIdentity(name, "cute_gemm", int(m.group(1)), "", role, shape, True)
    if m := _FUSED.match(name):
        variant = m.group(1)
        return KernelIdentity(name, "fused", int(m.group(2)), variant, m.group(3), None,
                              False if variant in _SIMT_FUSED else True)
    if m := _FACE.match(name):
        return KernelIdentity(name, "face", int(m.group(1)) - 1, "", "face_flux", None, False)
    if m := _SUPPORT.match(name):
        return KernelIdentity(name, "support", int(m.group(2)) - 1, "", m.group(1), None, False)
    if name.startswith(_OWN_PREFIXES):
        raise ModelError(f"kernel {name}: named like one of this project's kernels but not one the model "
                         "knows (composer/model/kernels.py lists the patterns)")
    if m := _LIBRARY_TENSOR.search(name):
        shape = f"{m.group(1)}x{m.group(2)}x{m.group(3)}"
        return KernelIdentity(name, "library", None, "", name, shape, True)
    if m := _CUTLASS_TENSOROP.search(name):
        shape = "x".join(g for g in m.groups() if g is not None)
        return KernelIdentity(name, "library", None, "", name, shape, True)
    if "tensorop" in name:
        raise ModelError(f"kernel {name}: a tensor-op library kernel whose MMA shape the model cannot read "
                         "from its name (composer/model/kernels.py knows tensorMxNxK and CUTLASS's d884gemm)")
    return KernelIdentity(name, "library", None, "", name, None, False)


def fused_variant(path: str) -> str:
    """The kernel-name prefix of a fused path (``FUSED_TC16`` -> ``fused_tc16``)."""
    return path.lower()


def sass_shape(ptx_shape: str, arch: str) -> tuple[str, int]:
    """(SASS DMMA shape, SASS instructions per PTX mma) a PTX shape becomes on ``arch``: sm_100
    expands m16n8k{4,8,16} into 2/4/8 DMMA.8x8x4 (paper S7.3)."""
    return expected_sass(mma_shape(ptx_shape), arch)


def shape_flop(shape: str) -> int:
    """FLOP one DMMA instruction of ``shape`` carries (``8x8x4`` or ``m8n8k4``)."""
    return mma_shape(shape).flop
