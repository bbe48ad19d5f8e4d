"""Support kernels of the library paths (pointwise flux, surface flux, lift/assembly, RK3 stage).

Templates in ``templates/*.cu.j2`` are specialized by Nq, compiled through NVRTC (disk-cached) and
launched with typed helpers. Array layouts follow shared/spec/operator.md: volume [e,k,j,i],
faces [e,f,b,a], all float64; vmapM/vmapP are int64 flat volume indices in the face layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from composer.arch.limits import DEFAULT_ARCH
from composer.runtime.device import Device, ensure_context
from composer.runtime.errors import LaunchError
from composer.runtime.module import Kernel, Module
from composer.runtime.nvrtc import CompiledKernel, compile_cuda
from composer.runtime.params import Param, params

from composer.dg.timeint import RK3_STAGES as SSP_RK3_STAGES

from .render import render

DEFAULT_BLOCK = 256
BLOCKS_PER_SM = 16  # grid cap = SMs x this; grid-stride loops cover the rest

SIGNATURES: dict[str, tuple[Param, ...]] = {
    "volume_flux": params("q:ptr u:ptr v:ptr w:ptr qu:ptr qv:ptr qw:ptr ne:i64"),
    "surface_flux": params("q:ptr u:ptr v:ptr w:ptr vmapM:ptr vmapP:ptr nx:ptr ny:ptr nz:ptr F:ptr "
                           "fstar:ptr ne:i64"),
    "separable_lift": params("dx:ptr dy:ptr dz:ptr Ex:ptr Ey:ptr Ez:ptr fstar:ptr dqdt:ptr ne:i64"),
    "rk3_stage": params("q0:ptr q_stage:ptr dqdt:ptr q_out:ptr a:f64 b:f64 dt:f64 ne:i64"),
}
#: The parity decomposition's forms of volume_flux and separable_lift (composer.parity): same
#: arguments, the fluxes written split and the derivatives read split. Odd orders only; loaded by
#: the paths that run it (``load_parity_kernels``), not by ``SupportKernels``.
PARITY_FAMILIES = ("volume_flux_parity", "separable_lift_parity")
SIGNATURES.update({f"{family}_parity": SIGNATURES[family] for family in ("volume_flux", "separable_lift")})
#: The four kernels of every library path (``SupportKernels``, ``composer build``).
FAMILIES = tuple(f for f in SIGNATURES if f not in PARITY_FAMILIES)
_PAIRED = {"volume_flux", "rk3_stage"}  # kernels whose main loop moves two doubles per iteration


def symbol(family: str, nq: int) -> str:
    """Entry-point name, e.g. ``volume_flux_nq8``."""
    _check_family(family)
    return f"{family}_nq{int(nq)}"


def _check_family(family: str) -> None:
    if family not in SIGNATURES:
        raise ValueError(f"unknown support kernel {family!r}; known: {', '.join(FAMILIES)}")


def source(family: str, nq: int, block: int = DEFAULT_BLOCK) -> str:
    """Rendered CUDA C++ of one kernel family for ``nq`` nodes per direction."""
    _check_family(family)
    if nq < 2:
        raise ValueError(f"nq must be >= 2, got {nq}")
    if family in PARITY_FAMILIES and nq % 2:
        raise ValueError(f"{family} needs an even nq (odd order), got {nq}")
    if not 1 <= block <= 1024:
        raise ValueError(f"block must be in [1, 1024], got {block}")
    return render(f"{family}.cu.j2", family=family, nq=int(nq), block=int(block))


def compile_support(family: str, nq: int, arch: str = DEFAULT_ARCH, block: int = DEFAULT_BLOCK,
                    cache_dir: Path | None = None) -> CompiledKernel:
    """NVRTC-compile one support kernel to a CUBIN (no GPU needed)."""
    name = symbol(family, nq)
    return compile_cuda(source(family, nq, block), f"{name}.cu", arch=arch, cache_dir=cache_dir,
                        entry_points=[name])


def load_support_kernel(family: str, nq: int, device: Device | None = None, block: int = DEFAULT_BLOCK,
                        cache_dir: Path | None = None) -> Kernel:
    """Compile for the device's arch, load, and return the Kernel with its signature and block."""
    dev = ensure_context(device)
    built = compile_support(family, nq, dev.arch, block, cache_dir)
    module = Module.from_cubin(built.cubin, dev)
    return module.get_kernel(built.symbol(symbol(family, nq)), SIGNATURES[family], block)


@dataclass
class SupportKernels:
    """The four support kernels for one Nq, loaded on one device."""

    nq: int
    volume_flux: Kernel
    surface_flux: Kernel
    separable_lift: Kernel
    rk3_stage: Kernel

    @classmethod
    def load(cls, nq: int, device: Device | None = None, block: int = DEFAULT_BLOCK,
             cache_dir: Path | None = None) -> SupportKernels:
        """Compile (or fetch from cache) and load all four families."""
        return cls(nq, **{f: load_support_kernel(f, nq, device, block, cache_dir) for f in FAMILIES})


def grid_size(work_items: int, block: int, sm_count: int | None, blocks_per_sm: int = BLOCKS_PER_SM) -> int:
    """Blocks for a grid-stride loop: enough to cover the work, capped at ``sm_count * blocks_per_sm``."""
    need = max(1, -(-int(work_items) // int(block)))
    if sm_count:
        need = min(need, int(sm_count) * blocks_per_sm)
    return min(need, 2**31 - 1)


def launch_shape(family: str, nq: int, ne: int, block: int, sm_count: int | None) -> tuple[int, int]:
    """(grid, block) used by the launch helpers: one thread per node (per pair for paired kernels, per
    octet of mirrored nodes for the parity kernels)."""
    _check_family(family)
    per_elem = 6 * nq * nq if family == "surface_flux" else (nq // 2) ** 3 if family in PARITY_FAMILIES else nq**3
    work = ne * per_elem
    if family in _PAIRED:
        work = (work + 1) // 2
    return grid_size(work, block, sm_count), block


def _launch(kernel: Kernel, family: str, args: tuple, ne: int, stream: Any) -> None:
    prefix = f"{family}_nq"
    if not kernel.name.startswith(prefix) or not kernel.name[len(prefix):].isdigit():
        raise LaunchError(f"expected a {family} kernel, got {kernel.name!r}")
    if int(ne) < 0:
        raise LaunchError(f"ne must be >= 0, got {ne}")
    if int(ne) == 0:
        return
    nq = int(kernel.name[len(prefix):])
    block = kernel.block[0] if kernel.block else DEFAULT_BLOCK
    grid, block = launch_shape(family, nq, int(ne), block, kernel.device.sm_count)
    kernel.launch(grid, block, args, 0, stream)


def launch_volume_flux(kernel: Kernel, q: Any, u: Any, v: Any, w: Any, qu: Any, qv: Any, qw: Any,
                       ne: int, stream: Any = None) -> None:
    """qu = q*u, qv = q*v, qw = q*w (volume arrays)."""
    _launch(kernel, "volume_flux", (q, u, v, w, qu, qv, qw, ne), ne, stream)


def launch_surface_flux(kernel: Kernel, q: Any, u: Any, v: Any, w: Any, vmapM: Any, vmapP: Any, nx: Any,
                        ny: Any, nz: Any, F: Any, fstar: Any, ne: int, stream: Any = None) -> None:
    """fstar (face array) from interior/exterior traces gathered through int64 vmapM/vmapP."""
    _launch(kernel, "surface_flux", (q, u, v, w, vmapM, vmapP, nx, ny, nz, F, fstar, ne), ne, stream)


def launch_separable_lift(kernel: Kernel, dx: Any, dy: Any, dz: Any, Ex: Any, Ey: Any, Ez: Any, fstar: Any,
                          dqdt: Any, ne: int, stream: Any = None) -> None:
    """dqdt = -(Ex*dx + Ey*dy + Ez*dz + LIFT(fstar))."""
    _launch(kernel, "separable_lift", (dx, dy, dz, Ex, Ey, Ez, fstar, dqdt, ne), ne, stream)


def launch_volume_flux_parity(kernel: Kernel, q: Any, u: Any, v: Any, w: Any, qu: Any, qv: Any, qw: Any,
                              ne: int, stream: Any = None) -> None:
    """qu, qv, qw split along i, j, k (composer.parity.reference.split_fluxes)."""
    _launch(kernel, "volume_flux_parity", (q, u, v, w, qu, qv, qw, ne), ne, stream)


def launch_separable_lift_parity(kernel: Kernel, dx: Any, dy: Any, dz: Any, Ex: Any, Ey: Any, Ez: Any,
                                 fstar: Any, dqdt: Any, ne: int, stream: Any = None) -> None:
    """dqdt from the split derivatives (composer.parity.reference.lift_from_split)."""
    _launch(kernel, "separable_lift_parity", (dx, dy, dz, Ex, Ey, Ez, fstar, dqdt, ne), ne, stream)


def load_parity_kernels(nq: int, device: Device | None = None, block: int = DEFAULT_BLOCK,
                        cache_dir: Path | None = None) -> dict[str, Kernel]:
    """The two parity kernels for ``nq`` (even) by family."""
    return {f: load_support_kernel(f, nq, device, block, cache_dir) for f in PARITY_FAMILIES}


def launch_rk3_stage(kernel: Kernel, q0: Any, q_stage: Any, dqdt: Any, q_out: Any, a: float, b: float,
                     dt: float, ne: int, stream: Any = None) -> None:
    """q_out = a*q0 + b*(q_stage + dt*dqdt); q_out may alias q0 or q_stage."""
    _launch(kernel, "rk3_stage", (q0, q_stage, dqdt, q_out, a, b, dt, ne), ne, stream)


# --- the volume fluxes split for overlap (composer.paths.overlap) ----------------------------------

#: Signature of every volume_products kernel: the unused product pointers may be 0.
PRODUCTS_SIGNATURE: tuple[Param, ...] = params("q:ptr u:ptr v:ptr w:ptr qu:ptr qv:ptr qw:ptr ne:i64 sm_limit:i32 "
                                               "work:ptr seen:ptr")
#: The velocity and the output of each product.
PRODUCT_ARGS = {"x": ("u", "qu"), "y": ("v", "qv"), "z": ("w", "qw")}
#: Pairs of doubles one block takes per chunk in the SM-confined form (16 per thread at 256 threads).
CHUNK_PAIRS = 4096
#: Blocks the SM-confined form launches per SM of the device: enough that, while a GEMM's blocks
#: leave slots, the blocks landing on the partition's SMs fill them (those landing elsewhere leave).
PRODUCT_BLOCKS_PER_SM = BLOCKS_PER_SM
#: Bytes of the SM-confined form's counters: chunks handed out and blocks finished (both reset by
#: the last block), and the chunks the last block had to take itself (never reset: the fallback's count).
PRODUCT_WORK_BYTES = 24
#: Index of the fallback's count among the counters (``OverlapKernels.leftover``).
PRODUCT_LEFTOVER_SLOT = 2


def product_roles(products: str) -> str:
    """``products`` as the canonical role string (a non-empty subset of "xyz" in that order)."""
    roles = "".join(r for r in "xyz" if r in str(products))
    if not roles or len(roles) != len(str(products)) or len(set(str(products))) != len(str(products)):
        raise ValueError(f"products must be a non-empty subset of 'xyz' without repeats, got {products!r}")
    return roles


def products_symbol(products: str, nq: int) -> str:
    """Entry-point name of a volume_products kernel, e.g. ``volume_products_xy_nq512``."""
    return f"volume_products_{product_roles(products)}_nq{int(nq)}"


def products_source(products: str, nq: int, block: int = DEFAULT_BLOCK) -> str:
    """Rendered CUDA C++ of the kernel forming the fluxes of ``products`` (a subset of "xyz")."""
    roles = product_roles(products)
    if nq < 2:
        raise ValueError(f"nq must be >= 2, got {nq}")
    if not 32 <= block <= 1024 or block % 32:
        raise ValueError(f"block must be a multiple of 32 in [32, 1024], got {block}")
    return render("volume_products.cu.j2", family="volume_products", nq=int(nq), block=int(block),
                  name=products_symbol(roles, nq), products=list(roles), chunk_pairs=CHUNK_PAIRS,
                  vel={r: PRODUCT_ARGS[r][0] for r in roles}, out={r: PRODUCT_ARGS[r][1] for r in roles})


def compile_products(products: str, nq: int, arch: str = DEFAULT_ARCH, block: int = DEFAULT_BLOCK,
                     cache_dir: Path | None = None) -> CompiledKernel:
    """NVRTC-compile one volume_products kernel to a CUBIN (no GPU needed)."""
    name = products_symbol(products, nq)
    return compile_cuda(products_source(products, nq, block), f"{name}.cu", arch=arch, cache_dir=cache_dir,
                        entry_points=[name])


def load_products_kernel(products: str, nq: int, device: Device | None = None, block: int = DEFAULT_BLOCK,
                         cache_dir: Path | None = None) -> Kernel:
    """Compile for the device's arch, load, and return the volume_products Kernel."""
    dev = ensure_context(device)
    built = compile_products(products, nq, dev.arch, block, cache_dir)
    module = Module.from_cubin(built.cubin, dev)
    return module.get_kernel(built.symbol(products_symbol(products, nq)), PRODUCTS_SIGNATURE, block)


def products_grid(nq: int, ne: int, block: int, sm_count: int | None, sm_limit: int) -> int:
    """Blocks of a volume_products launch: the grid-stride shape of volume_flux, or in the
    SM-confined form (``sm_limit > 0``) ``PRODUCT_BLOCKS_PER_SM`` per SM of the whole device."""
    if sm_limit > 0:
        return max(1, int(sm_count or 1) * PRODUCT_BLOCKS_PER_SM)
    return launch_shape("volume_flux", nq, ne, block, sm_count)[0]


def launch_volume_products(kernel: Kernel, products: str, q: Any, velocity: dict[str, Any], out: dict[str, Any],
                           ne: int, sm_limit: int = 0, work: Any = 0, seen: Any = 0, stream: Any = None) -> None:
    """``out[r] = q * velocity[r]`` for each role of ``products``; ``sm_limit > 0`` keeps the work on
    the SMs with %smid below it (``work``: a zeroed PRODUCT_WORK_BYTES counter buffer)."""
    roles = product_roles(products)
    expected = products_symbol(roles, 0)[:-1]
    if not kernel.name.startswith(expected) or not kernel.name[len(expected):].isdigit():
        raise LaunchError(f"expected a {expected}* kernel, got {kernel.name!r}")
    if int(ne) < 0:
        raise LaunchError(f"ne must be >= 0, got {ne}")
    if sm_limit < 0:
        raise LaunchError(f"sm_limit must be >= 0, got {sm_limit}")
    if sm_limit > 0 and not _address(work):
        raise LaunchError("the SM-confined volume_products needs its counter buffer (work)")
    if set(velocity) != set(roles) or set(out) != set(roles):
        raise LaunchError(f"volume_products_{roles}: velocities and outputs for {', '.join(roles)} expected, "
                          f"got {sorted(velocity)} and {sorted(out)}")
    if int(ne) == 0:
        return
    pointers = [q, *velocity.values(), *out.values()]
    misaligned = [i for i, ptr in enumerate(pointers) if _address(ptr) % 16]
    if misaligned:
        raise LaunchError("volume_products moves 16-byte pairs: every array pointer must be 16-byte aligned")
    slots = {"u": 0, "v": 0, "w": 0, "qu": 0, "qv": 0, "qw": 0}
    for r in roles:
        vel, prod = PRODUCT_ARGS[r]
        slots[vel], slots[prod] = velocity[r], out[r]
    nq = int(kernel.name.rsplit("_nq", 1)[1])
    block = kernel.block[0] if kernel.block else DEFAULT_BLOCK
    grid = products_grid(nq, int(ne), block, kernel.device.sm_count, int(sm_limit))
    kernel.launch(grid, block, (q, slots["u"], slots["v"], slots["w"], slots["qu"], slots["qv"], slots["qw"], ne,
                                int(sm_limit), work, seen), 0, stream)


def _address(value: Any) -> int:
    """The device address of a pointer argument (an int, or a buffer with ``ptr``)."""
    return int(getattr(value, "ptr", value) or 0)


RK3_STAGES = SSP_RK3_STAGES
"""(a, b) of the three SSP-RK3 stages for launch_rk3_stage (the reference integrator's own)."""
