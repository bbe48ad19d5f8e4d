"""Path GEMM_CUTE: the GEMM path with each volume GEMM run by our CuTe DSL kernel or by cuBLAS.

The CuTe DSL kernels are not compiled here: ``composer build`` cross-compiles them on a CPU
machine and the GPU machine loads the CUBINs from the build directory's manifest with
cuda-bindings alone. Which library runs which role, and the MMA shape, come from the schedule's
``[paths.GEMM_CUTE]`` table (``library = {x = "cute", ...}``, ``mma = "16x8x4"``, written by
``composer sweep-library``); the options ``library=``/``mma=``/``build_dir=`` override them.
Option ``parity`` (``composer.paths.parity``) runs each role as its two half-size products, on the
same CuTe kernels (their sizes, leading dimensions and strides are run-time arguments) or cuBLAS.
"""

from __future__ import annotations

from pathlib import Path as FsPath
from types import MappingProxyType
from typing import Any, Mapping

from composer.arch.mma import mma_shape
from composer.config.schedules import load_schedule
from composer.errors import ComposerError
from composer.gemm.cute.config import GemmConfig, KernelProblem, kernel_problem
from composer.gemm.cute.sweep import DEFAULT_LIBRARY, LIBRARIES
from composer.gemm.cute.tiles import DEFAULT_MMA
from composer.gemm.roles import ROLES, GemmSpec
from composer.paths.base import PathOption, directory_option
from composer.paths.library import LibraryPath
from composer.paths.parity import PARITY_OPTION, ParityGemms
from composer.runtime import Stream
from composer.runtime.manifest import KernelEntry, read_manifest, requested_build_dir
from composer.runtime.module import Kernel, Module



def library_option(value: str | Mapping[str, str]) -> dict[str, str]:
    """A library assignment given as an option: a mapping, one library for every role
    (``"cute"``), or per role (``"x=cute,z=cublas"``, as ``--option GEMM_CUTE.library=...`` gives it)."""
    if not isinstance(value, str):
        return dict(value)
    if "=" not in value:
        return {role: value.strip() for role in ROLES}
    pairs = [item.partition("=") for item in value.split(",") if item.strip()]
    if any(not sep for _, sep, _ in pairs):
        raise ComposerError(f"GEMM_CUTE library option {value!r}: expected LIB or ROLE=LIB[,ROLE=LIB...]")
    return {role.strip(): lib.strip() for role, _, lib in pairs}


def resolve_settings(order: int, options: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    """(mma, role -> library) from options, else the schedule, else the defaults."""
    table: dict[str, Any] = {}
    try:
        table = dict(load_schedule(order).paths.get("GEMM_CUTE", {}))
    except ComposerError:
        pass
    mma = str(options.get("mma") or table.get("mma") or DEFAULT_MMA)
    library = dict(DEFAULT_LIBRARY)
    library.update(table.get("library", {}))
    library.update(library_option(options.get("library") or {}))
    bad = {r: lib for r, lib in library.items() if r not in ROLES or lib not in LIBRARIES}
    if bad:
        raise ComposerError(f"GEMM_CUTE library assignment {bad}: roles are {ROLES}, libraries {LIBRARIES}")
    return mma, library


def entry_epilogue(entry: KernelEntry) -> str:
    """The epilogue a CuTe GEMM entry was built with: "store", or the text of its epilogue tree."""
    epilogue = entry.config.get("epilogue", "store")
    return epilogue["text"] if isinstance(epilogue, Mapping) else str(epilogue)


def find_gemm_entry(entries: list[KernelEntry], order: int, role: str, mma: str, arch: str,
                    epilogue: str = "store", product: str = "", config: GemmConfig | None = None,
                    store_group: int | None = None, product_staged: bool = False) -> KernelEntry:
    """The manifest entry of the ``role`` GEMM for ``order`` and ``mma`` built for ``arch`` with
    ``epilogue`` ("store", or an epilogue tree's text) and product operand ``product`` ("": none).
    With ``config``, the entry built with exactly that configuration (a build may hold several
    tiles of one GEMM: the carrier sweep's), else the first match (the caller compares tiles);
    with ``store_group`` too, the one of them built with that store group where there is one;
    ``product_staged``: the product formed in the stage rather than at the fragment loads."""
    matches = []
    for e in entries:
        c = e.config
        if c.get("kind") == "cute_gemm" and c.get("order") == order and c.get("role") == role \
                and c.get("mma") == mma and e.arch == arch and entry_epilogue(e) == epilogue \
                and (c.get("gemm") or {}).get("product", "") == product \
                and bool((c.get("gemm") or {}).get("product_staged", False)) == product_staged:
            matches.append(e)
    if matches:
        if config is not None:
            same = []
            for e in matches:
                try:
                    if GemmConfig.from_dict(e.config["gemm"]) == config:
                        same.append(e)
                except (KeyError, TypeError, ValueError):
                    continue
            grouped = [e for e in same if store_group is not None and isinstance(e.config.get("epilogue"), Mapping)
                       and e.config["epilogue"].get("store_group") == store_group]
            if grouped or same:
                return (grouped or same)[0]
        return matches[0]
    if epilogue != "store" or product:
        what = f"the epilogue {epilogue}" + ((" forming its flux in the stage" if product_staged else
                                              " forming its flux in the mainloop") if product else "")
        raise ComposerError(f"no CuTe GEMM for p={order} role {role} mma {mma} on {arch} with {what} in the "
                            f"build manifest; run: composer build --arch {arch} --mma {mma} --orders {order} "
                            f"--paths GEMM_FUSED")
    raise ComposerError(f"no CuTe GEMM for p={order} role {role} mma {mma} on {arch} in the build "
                        f"manifest; run: composer build --arch {arch} --mma {mma} --orders {order}")


def entry_gemm_config(entry: KernelEntry) -> GemmConfig:
    """The GEMM configuration a manifest entry was built from; a stale entry (written by another
    composer version, e.g. with a key since removed) stops with the command that refreshes it."""
    try:
        return GemmConfig.from_dict(entry.config["gemm"])
    except (KeyError, TypeError, ValueError) as exc:
        c = entry.config
        raise ComposerError(f"{entry.symbol}: its manifest entry does not describe a current GEMM "
                            f"configuration ({exc}); rebuild it: composer build --arch {entry.arch} "
                            f"--mma {c.get('mma', DEFAULT_MMA)} --orders {c.get('order', '...')}") from exc


def mma_option(value: str) -> str:
    """An MMA shape given as an option, in the ``16x8x4`` spelling the build manifest records."""
    return mma_shape(str(value)).name


def call_pointers(spec: GemmSpec, prob: KernelProblem, operands: Mapping[str, int], out: int) -> tuple[int, int, int]:
    """The kernel's A, B and C pointers for one BLAS call: each operand at its ``spec`` offset
    (the parity calls' halves), A and B exchanged where ``prob`` runs the call transposed."""
    a = operands[spec.a_operand] + 8 * spec.a_offset
    b = operands[spec.b_operand] + 8 * spec.b_offset
    swapped = prob.a_operand != spec.a_operand  # kernel_problem(spec, swap=True) binds spec's B to the kernel's A
    return (b, a, out + 8 * spec.c_offset) if swapped else (a, b, out + 8 * spec.c_offset)


class GemmCutePath(ParityGemms, LibraryPath):
    name = "GEMM_CUTE"
    build_kinds = frozenset({"cute", "support"})
    needs_build = True
    reads_mma = True
    min_sm = 80  # DMMA

    @classmethod
    def plan_settings(cls, order: int, **options: Any) -> str:
        """The MMA shape and who runs each GEMM (cuBLAS or our CuTe kernels time differently)."""
        mma, library = resolve_settings(order, options)
        try:
            tiles = dict(load_schedule(order).paths.get("GEMM_CUTE", {}).get("tiles", {}))
        except ComposerError:
            tiles = {}
        shown = ";".join(f"{r}:" + ",".join(f"{k}={v}" for k, v in sorted(dict(t).items()))
                         for r, t in sorted(tiles.items()) if library.get(r) == "cute")
        return (f"mma={mma} library=" + ",".join(f"{r}:{library[r]}" for r in ROLES) + (f" tiles={shown}" if shown else "")
                + cls.overlap_tag(order, options) + cls.parity_tag(order, options))
    options = MappingProxyType({
        **LibraryPath.options,
        **PARITY_OPTION,
        "mma": PathOption(mma_option, f"the GEMMs' MMA shape (default: the schedule's, else {DEFAULT_MMA})"),
        "library": PathOption(library_option, "who runs each role's GEMM: LIB or ROLE=LIB[,ROLE=LIB...] "
                                              "with LIB cute or cublas (default: the schedule's, else cute)"),
        "build_dir": PathOption(directory_option, "the `composer build` directory holding the CuTe GEMMs "
                                                  "(default: $COMPOSER_BUILD_DIR, else build/<arch>)"),
    })

    def __init__(self, problem: Any, **options: Any) -> None:
        self.setup_parity(problem, options)
        super().__init__(problem, **options)

    def gemm_settings(self) -> tuple[str, dict[str, str]]:
        """(mma, role -> library) of this instance."""
        return resolve_settings(self.problem.order, self.options)

    def gemm_entry(self, entries: list[KernelEntry], role: str) -> KernelEntry:
        """The manifest entry of the CuTe kernel that runs ``role``."""
        pb = self.problem
        return find_gemm_entry(entries, pb.order, role, self.mma, pb.device.arch)

    def setup_gemms(self) -> None:
        pb = self.problem
        self.mma, self.library = self.gemm_settings()
        self.kernels: dict[str, tuple[Kernel, GemmConfig, Any]] = {}
        self.call_problems: dict[str, tuple[tuple[GemmSpec, KernelProblem], ...]] = {}
        self.blas: dict[str, Any] = {}
        entries: list[KernelEntry] = []
        if any(lib == "cute" for lib in self.library.values()):
            build_dir = requested_build_dir(self.options.get("build_dir")) or FsPath("build") / pb.device.arch
            entries = read_manifest(build_dir / "manifest.json", verify=True)
        for role in ROLES:
            if self.library[role] == "cublas":
                from composer.gemm.cublas import CublasGemm

                self.blas[role] = CublasGemm(int(self.gemm_streams[role].handle))
                continue
            entry = self.gemm_entry(entries, role)
            cfg = entry_gemm_config(entry)
            prob = kernel_problem(self.specs[role], bool(entry.config["swap"]))
            if prob.majors != (cfg.a_major, cfg.b_major, cfg.c_major):
                raise ComposerError(f"{entry.symbol}: built for majors {cfg.a_major}{cfg.b_major}"
                                    f"{cfg.c_major}, role {role} needs {''.join(prob.majors)}")
            # the calls the role runs (parity: two half-size ones, on the same kernel: same majors)
            calls = tuple((spec, kernel_problem(spec, bool(entry.config["swap"]))) for spec in self.gemm_calls[role])
            aligned = all(call.vec2_ok and spec.a_offset % 2 == spec.b_offset % 2 == 0 for spec, call in calls)
            if cfg.vec == 2 and not (prob.vec2_ok and aligned):
                raise ComposerError(f"{entry.symbol}: 16-byte loads need even leading dimensions, batch strides and "
                                    f"operand offsets (p={pb.order}{' with parity' if self.parity_on else ''})")
            module = Module.from_manifest_entry(entry, device=pb.device)
            self.kernels[role] = (module.entry_kernel(), cfg, prob)
            self.call_problems[role] = calls
            self._modules = getattr(self, "_modules", []) + [module]

    def run_gemm(self, role: str, stream: Stream) -> None:
        self.launch_gemm(role, stream, self.derivative[role].ptr)

    def launch_gemm(self, role: str, stream: Stream, out: int, aux: tuple[int, ...] = (), face: int = 0,
                    flux: int | None = None, factor: int = 0) -> None:
        """Enqueue the ``role`` GEMM writing ``out`` (its epilogue reading ``aux`` and ``face``);
        its flux operand is ``flux`` (default: the role's flux array), times ``factor`` for a kernel
        that forms the product (``GemmConfig.product``)."""
        operands = self.gemm_operands(role, flux)
        if role in self.blas:
            for spec in self.gemm_calls[role]:
                self.blas[role].run(spec, operands, out, int(stream.handle))
            return
        kernel, cfg, _ = self.kernels[role]
        for spec, prob in self.call_problems[role]:
            a, b, c = call_pointers(spec, prob, operands, out)
            args = prob.args(a, b, c, aux, face, factor=factor)
            kernel.launch(cfg.grid(prob.m, prob.n, prob.batch), args=args, stream=stream)

    def launch_blocks(self) -> dict[str, int]:
        blocks = super().launch_blocks()
        for role, (_, cfg, prob) in self.kernels.items():
            blocks[f"gemm_{role}"] = cfg.grid(prob.m, prob.n, prob.batch)[0]  # linearized into grid.x
        return blocks

    def resident_blocks(self) -> dict[str, int]:
        resident = super().resident_blocks()
        for role, (kernel, cfg, _) in self.kernels.items():
            resident[f"gemm_{role}"] = kernel.resident_blocks(cfg.block_threads, cfg.smem_bytes)
        return resident

    def close(self) -> None:
        for blas in self.blas.values():
            blas.close()
        for module in getattr(self, "_modules", []):
            module.close()
        super().close()
