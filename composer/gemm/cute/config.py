"""Compile-time configuration of one CuTe DSL FP64 GEMM kernel, and its mapping from a GemmSpec.

Pure Python (no DSL import): the build, the manifest, the path and the tests reason about
configurations, shared-memory sizes, grid rules and kernel parameters without compiling.

The kernel computes a strided, batched ``C(m, n) = sum_k A(m, k) B(n, k)`` where each operand
has one contiguous ("major") mode fixed at compile time (vectorized ``cp.async`` needs it) and
one runtime leading dimension. A column-major BLAS call (:class:`GemmSpec`) maps onto it
directly, or transposed (``swap``: ``C^T = B^T A^T``) so that a long N becomes the MMA's M
mode; for the x role at small Nq that turns a 2-million-column, 8-row GEMM into one the 16x8
shapes tile without padding.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping, Sequence

from composer.arch.limits import DEFAULT_ARCH, arch_limits
from composer.arch.mma import MmaShape, check_supported, mma_shape
from composer.errors import ComposerError
from composer.gemm.cute.epilogue import EPILOGUE_NAMES, EPILOGUES, Epilogue
from composer.gemm.cute.swizzle import stage_stride_clear
from composer.gemm.roles import GemmSpec
from composer.runtime.params import Param


#: Auxiliary volume-array pointers in the ABI: the most an epilogue tree reads (the carrier
#: without the fold reads the other two derivatives and Ex, Ey, Ez).
AUX_SLOTS = 5

# The kernel's C ABI, in order. ``aux0..aux4`` (volume arrays in C's layout: C's ldc and batch
# stride), ``face`` (a face array, [e, f, b, a]) and ``alpha``/``beta`` belong to the epilogue
# (unused by "store"); ``factor`` is the second factor of the product operand (``product``: an
# operand formed elementwise while it is staged, in that operand's layout; unused otherwise). A
# fixed list keeps every variant launchable by one runtime path and lets fused epilogues and
# operands plug in without changing how kernels are launched.
KERNEL_PARAMS: tuple[Param, ...] = tuple(Param(n, t) for n, t in (
    ("a", "ptr"), ("b", "ptr"), ("c", "ptr"), *((f"aux{s}", "ptr") for s in range(AUX_SLOTS)), ("face", "ptr"),
    ("factor", "ptr"),
    ("m", "i32"), ("n", "i32"), ("k", "i32"), ("batch", "i32"),
    ("lda", "i64"), ("ldb", "i64"), ("ldc", "i64"),
    ("stride_a", "i64"), ("stride_b", "i64"), ("stride_c", "i64"),
    ("alpha", "f64"), ("beta", "f64"),
))


class GemmConfigError(ComposerError, ValueError):
    """A GEMM kernel configuration the kernel cannot be built for (the message names every reason).

    A ValueError too, so callers that caught the tile checks' ValueError still catch it.
    """


def _pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


@dataclass(frozen=True)
class GemmConfig:
    """Tile, warp layout, pipeline depth, operand majors and epilogue of one kernel.

    ``a_major`` is "m" or "k" (which mode of A(m, k) is contiguous), ``b_major`` "n" or "k",
    ``c_major`` "m" or "n". ``vec`` doubles per ``cp.async`` (2: 16 B; needs even leading
    dimensions and 16-byte aligned bases; 1: 8 B, any layout). ``product`` ("a", "b" or "" for
    none) names an operand the kernel forms elementwise as its array times the ABI's ``factor``
    array (same layout): both tiles are staged by cp.async and multiplied as fragments are read, or
    with ``product_staged`` once per element in shared memory (GEMM_FUSED's volume flux ``q * u``
    formed in the mainloop).
    """

    mma: str
    bm: int
    bn: int
    bk: int
    warps_m: int
    warps_n: int
    stages: int
    a_major: str = "k"
    b_major: str = "k"
    c_major: str = "m"
    vec: int = 2
    epilogue: str = "store"
    product: str = ""
    #: k-tiles before the mainloop's end at which every thread issues L2 prefetches of the tile's
    #: region of the epilogue's aux arrays (0: none). Why: the carry epilogue reads five volume
    #: arrays after the mainloop (ncu, p = 511: long-scoreboard stalls 2.03 per issue against
    #: cuBLAS's 0.4); prefetched, their DRAM traffic runs under the last k-tiles' MMAs.
    epilogue_prefetch: int = 0
    #: Issue those prefetches one aux array at a time, every floor(K / arrays) k-tiles from K k-tiles
    #: before the end, instead of all at once. Why: all at once (K = 2, 4) ran the p = 511 carrier
    #: 4.3-4.7 % slower (session 9): 5 x 64 KiB per tile arrive as one burst against the mainloop's own
    #: loads; spread over most of the mainloop (K up to 64) the extra DRAM traffic shares its whole span.
    epilogue_prefetch_split: bool = False
    #: Load the next k-tile's first fragments before the last k-step's MMAs (the wait and barrier
    #: for that tile move there too), so the LDS latency and the barrier after every k-tile run
    #: under the tensor pipe (the CUTLASS multistage mainloop's register double buffer). Why: the
    #: plain loop waits, syncs and loads at each k-tile's top with no MMA in flight; at bk = 16 with
    #: 16x8x8 that is every second k-step (ncu, Nq = 512: tensor pipe 74-79 % against cuBLAS's 91.5 %).
    fragment_pipeline: bool = False
    #: Tiles per block whose epilogues run on their own warps (0: off). The block holds the MMA
    #: warps plus as many epilogue warps; the MMA warps hand each tile's accumulators over through
    #: one of two shared-memory buffers (named barriers) and go on with the block's next tile while
    #: the epilogue warps read the buffer and the epilogue's arrays and store. Why: the p = 511 carrier
    #: runs mainloop and epilogue one after the other on each SM (ncu, session 10: 28.8 us per tile =
    #: 18.6 of MMA + 12.3 of epilogue DRAM), and no change inside that order was faster.
    async_epilogue_tiles: int = 0
    #: Accumulator hand-over buffers of the asynchronous epilogue (2: the MMA warps write tile j + 1
    #: while the epilogue warps still read tile j; 1: they wait for the read, which the epilogue warps
    #: finish at the start of their epilogue, long before the next mainloop ends). Why one: the two
    #: buffers of the p = 511 carriers (128 and 200 KB of shared memory with the pipeline) hold one
    #: block per SM, four MMA warps, and four MMA warps cannot keep the tensor pipe busy (session 11,
    #: ncu: 50 % active, stall ``wait``); one buffer on the 64x64x16 4-stage tile is 96 KB: two blocks.
    async_buffers: int = 2
    #: Blocks per SM the kernel is compiled for (``__launch_bounds__`` minimum, 0: none): ptxas caps
    #: the registers per thread so that that many blocks fit (two 256-thread asynchronous blocks:
    #: 128 registers, against the 221 the 64x64 asynchronous carrier takes uncapped). A request: on an
    #: architecture whose shared memory or threads per SM hold fewer such blocks (the H200-tuned
    #: three-block carrier on sm_80's 164 KB), it compiles for as many as fit (``resident_blocks``).
    min_blocks: int = 0
    #: Form the product operand once per staged element instead of at every fragment load: after a
    #: k-tile's cp.async group lands, each thread multiplies the elements it copied by their factor
    #: elements in shared memory (16-byte LDS/STS, one DMUL each) before the barrier that publishes the
    #: stage, and the MMAs then read a plain operand. Why: with the product at the fragment loads
    #: every warp that reads an element (warps_m or warps_n of them, at each k-step) repeats its second
    #: LDS and DMUL on the MMAs' critical path; the p = 511 GEMM_FUSED with the flux formed that way ran
    #: 1.41-1.65 x the array flux (session 10), more than the volume_flux kernel it removes.
    product_staged: bool = False
    #: Run the linear block index along the n tiles first (default: m first). Why: a GEMM whose A
    #: operand is the large one (the z GEMM forming q*w: m = Nq^2, n = Nq) otherwise starts the blocks
    #: that share an A panel 2048 blocks apart at p = 511, and each of its Nq / bn re-reads of the panel
    #: comes from DRAM (ncu, session 13: 4.05 TB/s, 84 % of the DRAM peak, for that kernel alone).
    n_fastest: bool = False
    #: Spread the first wave's start over this many microseconds (0: off): block b of the first
    #: ``resident`` (= %nsmid x blocks per SM) waits b / resident of it before its mainloop, so the
    #: co-resident blocks of an SM start half a period apart and the SMs' phases spread evenly. Why:
    #: every block's work is the same, so blocks that start together stay in phase: all mainloops, then
    #: all epilogues at once (ncu, p = 511 carrier, session 10: 28.8 us per tile per SM = 18.6 of MMA at
    #: cuBLAS's rate + 12.3 of epilogue DRAM at one SM's share of the bandwidth, tensor pipe 60 %, DRAM
    #: 45 %: the phases add up instead of overlapping). Out of phase, one block's epilogue reads would run
    #: under the other's MMAs and the GPU's DRAM demand spread over time. Measured (session 25, an H100):
    #: x0.994 / x1.000 / x0.997 of the carrier at p = 511 / 575 / 767, so the start phase is not what
    #: keeps the two apart; off in every schedule, kept for the sweep (docs/results.md section 8b).
    stagger_us: int = 0

    @property
    def shape(self) -> MmaShape:
        return mma_shape(self.mma)

    @property
    def threads(self) -> int:
        return 32 * self.warps_m * self.warps_n

    @property
    def block_threads(self) -> int:
        """Threads per block: the MMA warps, and as many epilogue warps with async_epilogue_tiles."""
        return self.threads * (2 if self.async_epilogue_tiles else 1)

    @property
    def acc_buffer_bytes(self) -> int:
        """Shared memory of the accumulator hand-over buffers (async_epilogue_tiles only)."""
        return self.async_buffers * self.bm * self.bn * 8 if self.async_epilogue_tiles else 0

    def resident_blocks(self, arch: str | None = None) -> int:
        """The blocks per SM the kernel is compiled for on ``arch`` (DEFAULT_ARCH when None): ``min_blocks``
        lowered to what the SM's shared memory and threads hold (at least one), 0 without the key."""
        if not self.min_blocks:
            return 0
        limits = arch_limits(arch if arch is not None else DEFAULT_ARCH)
        by_smem = limits.smem_per_sm // (self.smem_bytes + limits.smem_reserved_per_block)
        by_threads = limits.max_threads_per_sm // self.block_threads
        return max(1, min(self.min_blocks, by_smem, by_threads))

    def smem_blocks(self, arch: str | None = None) -> int:
        """Blocks of this kernel one SM's shared memory holds on ``arch`` (DEFAULT_ARCH when None)."""
        limits = arch_limits(arch if arch is not None else DEFAULT_ARCH)
        return limits.smem_per_sm // (self.smem_bytes + limits.smem_reserved_per_block)

    def register_blocks(self, arch: str | None = None) -> int:
        """Blocks of this kernel one SM's register file holds at its register cap (``registers_cap``: the
        most ptxas may use, 255 per thread without ``min_blocks``), on ``arch`` (DEFAULT_ARCH when None)."""
        limits = arch_limits(arch if arch is not None else DEFAULT_ARCH)
        return limits.registers_per_sm // (self.registers_cap(arch) * self.block_threads)

    def registers_cap(self, arch: str | None = None) -> int:
        """Registers per thread ptxas may use on ``arch`` (255 without ``min_blocks``): the register
        file (65536) over resident_blocks x threads, rounded down to the allocation granule of 8."""
        blocks = self.resident_blocks(arch)
        if not blocks:
            return 255
        return min(255, 65536 // (blocks * self.block_threads) // 8 * 8)

    @property
    def warp_tile(self) -> tuple[int, int]:
        return self.bm // self.warps_m, self.bn // self.warps_n

    @property
    def mma_tiles(self) -> tuple[int, int]:
        """MMA instructions per warp along M and N for one k-step."""
        wm, wn = self.warp_tile
        return wm // self.shape.m, wn // self.shape.n

    @property
    def accumulators(self) -> int:
        """FP64 accumulator registers per thread."""
        tm, tn = self.mma_tiles
        return tm * tn * self.shape.c_regs

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory: ``stages`` buffers of the A (bm x bk) and B (bn x bk) tiles, and
        of the factor tile of the product operand."""
        return 8 * self.stages * (self.bm + self.bn + self.product_rows) * self.bk + self.acc_buffer_bytes

    @property
    def product_rows(self) -> int:
        """Rows of the product operand's tile (0 without one): its factor tile's share of smem."""
        return {"a": self.bm, "b": self.bn}.get(self.product, 0)

    @property
    def mma_per_ktile(self) -> int:
        """PTX mma instructions per warp per k-tile (what one unrolled mainloop body issues)."""
        tm, tn = self.mma_tiles
        return tm * tn * (self.bk // self.shape.k)

    @property
    def tag(self) -> str:
        """Short, file-name-safe identity: shape, tile, warps, stages, majors, vec, epilogue."""
        return (f"m{self.mma.replace('x', '_')}_t{self.bm}x{self.bn}x{self.bk}_w{self.warps_m}x"
                f"{self.warps_n}_s{self.stages}_{self.a_major}{self.b_major}{self.c_major}"
                f"_v{self.vec}_{self.epilogue}" + (f"_p{self.product}" if self.product else "") + ("s" if self.product_staged else "")
                + ("_nf" if self.n_fastest else "")
                + (f"_e{self.epilogue_prefetch}" if self.epilogue_prefetch else "")
                + ("s" if self.epilogue_prefetch_split and self.epilogue_prefetch else "")
                + ("_fp" if self.fragment_pipeline else "")
                + (f"_ae{self.async_epilogue_tiles}" if self.async_epilogue_tiles else "")
                + (f"b{self.async_buffers}" if self.async_epilogue_tiles and self.async_buffers != 2 else "")
                + (f"_mb{self.min_blocks}" if self.min_blocks else "")
                + (f"_st{self.stagger_us}" if self.stagger_us else ""))

    def validate(self, arch: str | None = None) -> "GemmConfig":
        """Return ``self`` if the kernel can be built for it (and for ``arch``, when given).

        Raises UnsupportedShapeError when ``arch`` lacks the MMA shape and GemmConfigError naming
        every other problem (tile, warp layout, pipeline depth, shared memory, copy width,
        majors, epilogue), so a bad configuration fails here rather than inside the DSL. Shared
        memory and threads are checked against the limits of ``arch``; without one, against
        DEFAULT_ARCH's (the architecture the shipped tiles target).
        """
        if arch is not None:
            check_supported(self.shape, arch)
        problems = self._problems(arch if arch is not None else DEFAULT_ARCH)
        if problems:
            raise GemmConfigError(f"GEMM config {self.tag}: " + "; ".join(problems))
        return self

    def _problems(self, arch: str) -> list[str]:
        """Every reason the kernel cannot be built for this configuration on ``arch`` (none: it can)."""
        limits = arch_limits(arch)
        problems = [f"{name}={getattr(self, name)} must be a power of two"
                    for name in ("bm", "bn", "bk", "warps_m", "warps_n") if not _pow2(getattr(self, name))]
        if problems:  # the checks below divide by these
            return problems
        s = self.shape
        wm, wn = self.warp_tile
        if wm < s.m or wn < s.n or wm % s.m or wn % s.n:
            problems.append(f"warp tile {wm}x{wn} (bm/warps_m x bn/warps_n) is not a multiple of "
                            f"the mma {s.m}x{s.n}")
        if self.bk < s.k or self.bk % s.k or self.bk < 4:
            problems.append(f"bk={self.bk} is not a multiple of the mma k={s.k} (and at least 4)")
        if not 2 <= self.stages <= 8:
            problems.append(f"stages={self.stages} outside [2, 8]")
        if self.block_threads > limits.max_threads_per_block:
            problems.append(f"{self.block_threads} threads per block exceed {limits.max_threads_per_block} ({limits.arch})")
        if self.async_epilogue_tiles:
            if not 2 <= self.async_epilogue_tiles <= 64:
                problems.append(f"async_epilogue_tiles={self.async_epilogue_tiles} outside [2, 64]")
            if self.epilogue_prefetch or self.fragment_pipeline:
                problems.append("async_epilogue_tiles runs without epilogue_prefetch and fragment_pipeline")
            if self.threads > 128:  # 2 x threads share 65536 registers: above 128 MMA threads, < 255 each
                problems.append(f"async_epilogue_tiles needs at most 128 MMA threads (4 warps), got {self.threads}: "
                                "with as many epilogue threads a block of more would cap registers below 255")
        if self.async_buffers not in (1, 2):
            problems.append(f"async_buffers={self.async_buffers} must be 1 or 2")
        elif self.async_buffers != 2 and not self.async_epilogue_tiles:
            problems.append("async_buffers applies to async_epilogue_tiles only")
        if not 0 <= self.min_blocks <= 4:
            problems.append(f"min_blocks={self.min_blocks} outside [0, 4]")
        elif self.min_blocks and self.registers_cap(arch) < 2 * self.accumulators + 24:
            problems.append(f"min_blocks={self.min_blocks} ({self.resident_blocks(arch)} resident on {limits.arch}) "
                            f"caps registers at {self.registers_cap(arch)} per thread, too few for "
                            f"{self.accumulators} FP64 accumulators")
        if self.a_major not in ("m", "k") or self.b_major not in ("n", "k") or self.c_major not in ("m", "n"):
            problems.append(f"majors a={self.a_major!r} b={self.b_major!r} c={self.c_major!r} "
                            "(allowed: a in m/k, b in n/k, c in m/n)")
        if self.vec not in (1, 2):
            problems.append(f"vec={self.vec} must be 1 (8-byte cp.async) or 2 (16-byte)")
        for operand, rows, mn_major in (("A", self.bm, self.a_major == "m"),
                                        ("B", self.bn, self.b_major == "n")):
            if not stage_stride_clear(rows, self.bk, mn_major):
                problems.append(f"the {operand} stage stride {rows * self.bk} doubles lies inside "
                                "the swizzled address bits")
        limit = 64 if self.epilogue_prefetch_split else 16
        if not 0 <= self.epilogue_prefetch <= limit:
            problems.append(f"epilogue_prefetch={self.epilogue_prefetch} outside [0, {limit}] k-tiles"
                            + ("" if self.epilogue_prefetch_split else " (64 with epilogue_prefetch_split)"))
        if self.epilogue_prefetch_split and not self.epilogue_prefetch:
            problems.append("epilogue_prefetch_split needs epilogue_prefetch > 0 (the k-tiles it spreads over)")
        if not 0 <= self.stagger_us <= 1000:
            problems.append(f"stagger_us={self.stagger_us} outside [0, 1000] microseconds")
        if self.stagger_us and self.async_epilogue_tiles:
            problems.append("stagger_us applies to one tile per block (async_epilogue_tiles runs its own tiles)")
        if self.product not in ("", "a", "b"):
            problems.append(f"product={self.product!r} must be 'a', 'b' or '' (none)")
        if self.product_staged and not self.product:
            problems.append("product_staged needs a product operand (product = 'a' or 'b')")
        if self.product_staged and self.fragment_pipeline:
            problems.append("product_staged runs without fragment_pipeline (the pipeline loads a stage's first "
                            "fragments before the barrier that publishes its products)")
        if self.epilogue not in EPILOGUE_NAMES:
            problems.append(f"epilogue {self.epilogue!r} not in {sorted(EPILOGUE_NAMES)}")
        if self.smem_bytes > limits.smem_per_block_optin:
            factor = f" + {self.product_rows}" if self.product_rows else ""
            problems.append(f"shared memory {self.stages} stages x ({self.bm} + {self.bn}{factor}) x {self.bk} "
                            f"doubles = {self.smem_bytes} B exceeds the {limits.smem_per_block_optin} B "
                            f"a block may use on {limits.arch}")
        if self.accumulators > 128:
            problems.append(f"{self.accumulators} accumulator registers per thread (> 128) would spill")
        return problems

    def grid_rule(self) -> str:
        """Manifest grid rule: one block per (m tile, n tile, batch), linearized into grid.x."""
        tiles = f"cdiv(m, {self.bm}) * cdiv(n, {self.bn}) * batch"
        return f"cdiv({tiles}, {self.async_epilogue_tiles})" if self.async_epilogue_tiles else tiles

    def grid(self, m: int, n: int, batch: int) -> tuple[int, int, int]:
        tiles = (-(-m // self.bm)) * (-(-n // self.bn)) * batch
        return (-(-tiles // self.async_epilogue_tiles) if self.async_epilogue_tiles else tiles), 1, 1

    def to_dict(self) -> dict[str, Any]:
        """The fields; the optional switches (``epilogue_prefetch``, ``fragment_pipeline``) only when set, so that builds made before they existed
        (the same kernels) stay up to date."""
        out = asdict(self)
        for key in ("epilogue_prefetch", "epilogue_prefetch_split", "fragment_pipeline", "async_epilogue_tiles",
                    "min_blocks", "product_staged", "n_fastest", "stagger_us"):
            if not out[key]:
                del out[key]
        if out["async_buffers"] == 2:
            del out["async_buffers"]
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "GemmConfig":
        names = {f.name for f in fields(cls)}
        unknown = set(raw) - names
        if unknown:
            raise ValueError(f"unknown GEMM config keys {sorted(unknown)} (allowed: {sorted(names)})")
        return cls(**dict(raw))


def resolve_epilogue(cfg: GemmConfig, epilogue: Epilogue | None = None) -> Epilogue:
    """The epilogue instance a kernel of ``cfg`` runs: built from the config's name, or the given
    one, which must be of the family the config names (a specialized family needs one)."""
    if epilogue is None:
        if cfg.epilogue not in EPILOGUES:
            raise GemmConfigError(f"GEMM config {cfg.tag}: epilogue {cfg.epilogue!r} is specialized per "
                                  "instance; pass the instance (e.g. an epilogue tree)")
        return EPILOGUES[cfg.epilogue]()
    if epilogue.name != cfg.epilogue:
        raise GemmConfigError(f"GEMM config {cfg.tag} names epilogue {cfg.epilogue!r}, "
                              f"given a {epilogue.name!r} epilogue")
    return epilogue


@dataclass(frozen=True)
class KernelProblem:
    """Runtime arguments for one launch: sizes, leading dimensions, batch strides, operand names.

    ``a_operand``/``b_operand`` name the GemmSpec buffers ("D" or "flux") bound to the kernel's
    A and B; ``majors`` is what the configuration must be compiled with.
    """

    m: int
    n: int
    k: int
    batch: int
    lda: int
    ldb: int
    ldc: int
    stride_a: int
    stride_b: int
    stride_c: int
    a_operand: str
    b_operand: str
    majors: tuple[str, str, str]

    def args(self, a: int, b: int, c: int, aux: Sequence[int] = (), face: int = 0, alpha: float = 1.0,
             beta: float = 0.0, factor: int = 0) -> tuple[Any, ...]:
        """Arguments in KERNEL_PARAMS order: the operands and epilogue values given here (``aux``
        fills the aux slots in order, the rest are 0; ``factor`` the product operand's second
        array), the sizes, leading dimensions and strides from this problem (its fields carry the
        ABI's names)."""
        if len(aux) > AUX_SLOTS:
            raise ValueError(f"{len(aux)} aux pointers; the kernel has {AUX_SLOTS} slots")
        slots = [*aux, *([0] * (AUX_SLOTS - len(aux)))]
        given = {"a": a, "b": b, "c": c, "face": face, "factor": factor, "alpha": alpha, "beta": beta,
                 **{f"aux{s}": ptr for s, ptr in enumerate(slots)}}
        return tuple(given[p.name] if p.name in given else getattr(self, p.name) for p in KERNEL_PARAMS)

    @property
    def vec2_ok(self) -> bool:
        """Whether 16-byte cp.async is legal: every leading dimension and batch stride even."""
        return all(x % 2 == 0 for x in (self.lda, self.ldb, self.stride_a, self.stride_b))


def kernel_problem(spec: GemmSpec, swap: bool = False) -> KernelProblem:
    """The kernel's view of a column-major BLAS call, optionally transposed (``swap``).

    Column-major ``op(A)`` is (m x k): with ``transa`` its buffer is (k x m), so A(m, k) sits at
    ``k + m*lda`` (k contiguous), else at ``m + k*lda`` (m contiguous). ``op(B)`` is (k x n):
    without ``transb`` B(n, k) sits at ``k + n*ldb`` (k contiguous). C(m, n) is at ``m + n*ldc``.
    Swapping computes ``C^T(n, m) = sum_k B(n, k) A(m, k)``: the roles of A and B exchange and C
    becomes n-contiguous in the kernel's (m', n') = (n, m) frame.
    """
    a_major = "k" if spec.transa else "m"
    b_major = "n" if spec.transb else "k"
    if not swap:
        return KernelProblem(spec.m, spec.n, spec.k, spec.batch, spec.lda, spec.ldb, spec.ldc,
                             spec.stride_a, spec.stride_b, spec.stride_c, spec.a_operand,
                             spec.b_operand, (a_major, b_major, "m"))
    # kernel A' = B (rows n), kernel B' = A (rows m): a mode named "m"/"n" keeps its contiguity.
    return KernelProblem(spec.n, spec.m, spec.k, spec.batch, spec.ldb, spec.lda, spec.ldc,
                         spec.stride_b, spec.stride_a, spec.stride_c, spec.b_operand,
                         spec.a_operand, ("m" if b_major == "n" else "k",
                                          "n" if a_major == "m" else "k", "n"))


def split_prefetch_k_tiles(k_tiles: int, window: int, arrays: int) -> list[int]:
    """The k-tile at which each aux array's prefetches are issued under ``epilogue_prefetch_split``
    (what the kernel computes at run time, composer/gemm/cute/kernel.py): over the last ``window``
    k-tiles (the whole mainloop when it is shorter), one array every floor(window / arrays) k-tiles;
    a window shorter than the arrays puts one per k-tile and the rest on the last."""
    span = min(window, k_tiles)
    gap = span // arrays if span >= arrays else 1
    start = k_tiles - span
    return [min(start + j * gap, k_tiles - 1) for j in range(arrays)]


def config_for(spec: GemmSpec, mma: str, bm: int, bn: int, bk: int, warps_m: int, warps_n: int,
               stages: int, swap: bool = False, epilogue: str = "store", epilogue_prefetch: int = 0,
               epilogue_prefetch_split: bool = False, fragment_pipeline: bool = False,
               async_epilogue_tiles: int = 0, async_buffers: int = 2, min_blocks: int = 0,
               stagger_us: int = 0) -> GemmConfig:
    """A configuration with the majors (and cp.async width) the spec's layout requires."""
    prob = kernel_problem(spec, swap)
    a, b, c = prob.majors
    return GemmConfig(mma, bm, bn, bk, warps_m, warps_n, stages, a, b, c,
                      2 if prob.vec2_ok else 1, epilogue, epilogue_prefetch=epilogue_prefetch,
                      epilogue_prefetch_split=epilogue_prefetch_split, fragment_pipeline=fragment_pipeline,
                      async_epilogue_tiles=async_epilogue_tiles, async_buffers=async_buffers,
                      min_blocks=min_blocks, stagger_us=stagger_us)
