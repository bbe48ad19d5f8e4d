"""The fused element-local paths FUSED, FUSED_TC, FUSED_DFMA and FUSED_TC16 as ``Path`` objects.

One class does the work; the four registered subclasses only name the variant, so the four
paths launch identically and differ only in what the builder renders for them.

Declared data flow (``program``): with ``flux = "array"`` the face kernel writes fstar; every
volume kernel reads it (the lift of its pair of faces), the first writes dqdt and each later one
subtracts from it. The scheduler therefore finds one chain and no concurrency to exploit: the face
kernel cannot overlap the volume kernels that read what it writes.

With ``chunk_elements`` (``FusedConfig``) each volume kernel is declared once per chunk of consecutive
elements, writing that chunk's share of dqdt (``dqdt#c``), and each kernel's chunks share a resource
(one per kernel), so they follow one another: the scheduler then finds a pipeline of one lane per
kernel, kernel n on chunk c beside kernel n - 1 on chunk c + 1, and the later kernel comes back to a
chunk's q and dqdt while they are still in L2. Measured slower at every chunk size on an H100 (session 28,
results.md section 3: each chunk's launch pays its own ramp and tail); kept, off by default.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from composer import counts
from composer.errors import ComposerError, ConfigError
from composer.arch.limits import arch_limits, resident_blocks
from composer.arch.machines import Machine
from composer.arch.mma import mma_shape
from composer.config.schedules import available_orders, load_schedule
from composer.fused.builder import (FusedBuild, KernelSource, build, kernel_d_operand, kernel_origin, kernel_sources,
                                    prebuilt)
from composer.fused.traces import (interior_maps_problem, x_chain_maps_problem, x_face_maps_problem,
                                   x_pairs_maps_problem)
from composer.fused.links import face_links
from composer.fused.traffic import LINK
from composer.fused.order import launch_order
from composer.fused.config import (ALLOWED_MMA, SUPPORTED_ORDERS, FusedConfig, fused_config, one_element_form,
                                   table_variant)
from composer.paths.base import Launcher, Path, PathOption, directory_option, positive_int_option
from composer.paths.problem import DeviceProblem
from composer.paths.program import FACE_FLUX_READS, OUTPUT, face_bytes, face_flux_cost, roof_seconds, volume_bytes
from composer.sched import KernelNode
from composer.runtime.manifest import requested_build_dir
from composer.runtime.module import Kernel, Module

FACE_BLOCKS_PER_SM = 16  # grid cap of the grid-stride face kernel
# Without a schedule table to read (an order the variant lacks, or no table for it), the memory
# estimate follows the paper: fstar stays on chip at low order and, from this order up, a separate
# face kernel stores it as a face array.
FACE_FLUX_ARRAY_MIN_ORDER = 63


#: What every volume kernel reads besides fstar and dqdt: its arguments.
VOLUME_READS = ("q", "u", "v", "w", "Ex", "Ey", "Ez", "vmapM", "vmapP", "nx", "ny", "nz", "F", "D")


def launch_grid(kernel: KernelSource, config: FusedConfig, num_elements: int, nq: int, sm_count: int,
                resident: int = 0) -> int:
    """Blocks of one fused kernel's launch: per element box for a volume kernel (a block walks
    ``elements_per_block`` elements), a capped grid-stride loop for the face kernel; a persistent
    streamed kernel gets its ``resident`` blocks per SM on every SM (its tiles, if fewer)."""
    if kernel.persistent:
        if resident < 1:
            raise ValueError(f"{kernel.name}: a persistent kernel's grid needs its resident blocks per SM")
        tiles = num_elements * kernel.blocks_per_element
        if tiles >= 2**31:  # the kernel numbers its tiles in 32 bits, as a one-tile-per-block grid would
            raise ValueError(f"{kernel.name}: {tiles} output tiles exceed a 32-bit tile index")
        return min(tiles, resident * sm_count)
    if kernel.blocks_per_element:
        if config.trace_cluster > 1:  # padded to whole clusters of elements (the extra blocks store nothing)
            return -(-num_elements // config.trace_cluster) * config.trace_cluster
        if config.x_pairs:  # two x-neighbour elements per block (the path checked that they pair up)
            if num_elements % 2:
                raise ValueError(f"{kernel.name}: x_pairs needs an even number of elements, got {num_elements}")
            return num_elements // 2
        return -(-num_elements // config.elements_per_block) * kernel.blocks_per_element
    work = num_elements * 6 * nq**2
    return max(1, min(-(-work // kernel.threads), sm_count * FACE_BLOCKS_PER_SM))


def chunk_ranges(num_elements: int, chunk_elements: int) -> list[tuple[int, int]]:
    """(first element, end) of each launch chunk: one chunk of every element when ``chunk_elements``
    is 0 (unchunked), else consecutive runs of ``chunk_elements`` (the last one shorter)."""
    if chunk_elements <= 0 or num_elements <= 0:
        return [(0, num_elements)]
    return [(e, min(e + chunk_elements, num_elements)) for e in range(0, num_elements, chunk_elements)]


def chunk_node(kernel_name: str, config: FusedConfig, chunk: int) -> str:
    """The node name of a volume kernel's launch on ``chunk`` (the kernel's name when unchunked)."""
    return f"{kernel_name}#{chunk}" if config.chunk_elements else kernel_name


def chunk_output(config: FusedConfig, chunk: int) -> str:
    """The array a chunk's volume kernels write: dqdt, or its share ``dqdt#c`` when chunked."""
    return f"{OUTPUT}#{chunk}" if config.chunk_elements else OUTPUT


#: Chunks a chunked pipeline's first kernel may run ahead of its last: kernel 0 on chunk c waits for the
#: last kernel on chunk c - CHUNK_WINDOW, so that the lanes stay within the L2's reach of each other.
CHUNK_WINDOW = 2


def chunk_resources(kernel_name: str, config: FusedConfig, chunk: int) -> tuple[str, ...] | None:
    """What orders a chunked kernel's launches (``KernelNode.resource``): its own lane (the kernel's
    name: its chunks follow one another) and the window ``chunk mod CHUNK_WINDOW`` that every kernel of
    the chunk names, so that the first kernel of chunk c follows the last kernel of chunk
    c - CHUNK_WINDOW. Without the window the first lane (xy, the faster at p = 31) runs ahead, and
    the later kernel comes back to chunks long gone from the L2. None when unchunked."""
    if not config.chunk_elements:
        return None
    return (kernel_name, f"chunk_window{chunk % CHUNK_WINDOW}")


def occupancy_padding(kernel: Kernel, threads: int, smem: int, cap: int) -> int:
    """Dynamic shared memory that holds ``kernel`` to ``cap`` blocks per SM (``smem`` where it
    holds no more already): the same binary at fewer resident warps, which a shape transfer to a
    binary with more registers needs to know (composer.model.predict: the 16-row twin of FUSED_TC's
    p = 255 table holds one block per SM where FUSED_TC holds two). The carveout is set to the
    largest shared share, so that the padding and not the L1/shared split sets the count."""
    natural = kernel.resident_blocks(threads, smem)
    if natural <= cap:
        return smem
    _prefer_shared_carveout(kernel)
    limits = arch_limits(kernel.device.arch)
    pad = limits.smem_per_block(cap) - kernel.static_smem
    kernel.set_max_dynamic_smem(pad)
    while pad > smem and kernel.resident_blocks(threads, pad) < cap:
        pad -= 128
    if pad <= smem or kernel.resident_blocks(threads, pad) != cap:
        raise ComposerError(f"{kernel.name}: no shared-memory padding holds it to {cap} blocks per SM "
                            f"({natural} without)")
    return pad


def carveout_option(value: int | str) -> int:
    """A preferred shared-memory carveout given as an option: an integer percentage 0 ... 100 (an int, or its
    decimal string; not a float or a bool, which the table key refuses too)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)) or (isinstance(value, str) and not value.strip().isdigit()):
        raise ValueError(f"expected a percentage 0 ... 100, got {value!r}")
    number = int(value)
    if not 0 <= number <= 100:
        raise ValueError(f"expected a percentage 0 ... 100, got {value!r}")
    return number


def sm_sides_option(value: str) -> str:
    """The side map a side-queued table reads (composer.runtime.l2_sides.SIDE_MAP_KINDS)."""
    from composer.runtime.l2_sides import SIDE_MAP_KINDS

    if value not in SIDE_MAP_KINDS:
        raise ValueError(f"expected one of {', '.join(SIDE_MAP_KINDS)}, got {value!r}")
    return value


def set_carveout(kernel: Kernel, threads: int, smem: int, percent: int) -> dict[str, int]:
    """Ask for the preferred carveout ``percent`` for ``kernel`` and say what it gives by the arch's
    table: shared memory and L1 per SM, blocks per SM (and what the occupancy calculator answers).
    Why an option: the p = 7 and 15 kernels are bound by the L2 and its partition link (ncu, sessions
    27-33), and the default split gives their many blocks the shared memory and leaves the L1 60 KB of
    256 on sm_90; fewer blocks with more L1 for the face gathers' and the staging loads' reuse is the
    trade it measures. A carveout that holds no block is refused in one line."""
    limits = arch_limits(kernel.device.arch)
    capacity = limits.carveout_capacity(percent)
    blocks = resident_blocks(limits, threads, smem + kernel.static_smem, kernel.num_regs, smem_capacity=capacity)
    if blocks < 1:
        raise ConfigError(f"{kernel.name}: carveout {percent} % gives {capacity // 1024} KiB of shared memory per SM, "
                          f"less than one block's {(smem + kernel.static_smem) // 1024 + 1} KiB")
    kernel.set_preferred_carveout(percent)
    return {"percent": percent, "smem_kib": capacity // 1024, "l1_kib": (limits.l1_shared_per_sm - capacity) // 1024,
            "blocks_per_sm": blocks, "blocks_per_sm_calculator": kernel.resident_blocks(threads, smem)}


def _prefer_shared_carveout(kernel: Kernel) -> None:
    """min_blocks >= 2: ask for the largest shared-memory carveout, so that the driver's L1/shared
    split never caps the blocks per SM below the min_blocks the kernel was compiled for."""
    kernel.set_preferred_carveout(100)


def fused_config_option(value: FusedConfig) -> FusedConfig:
    """A FusedConfig given as the ``config`` option (from Python: a sweep's candidate)."""
    if not isinstance(value, FusedConfig):
        raise TypeError(f"expected a FusedConfig (from Python, e.g. a sweep candidate), got {type(value).__name__}")
    return value


_NOTED: set[tuple[str, int]] = set()


def note_compiler_mismatch(config: FusedConfig, origin: str) -> None:
    """One line on stderr (once per variant and order in a process) when the kernels run are not
    those the table was measured with: they are correct (validated like any others), but their
    speed is not the table's."""
    if (config.variant, config.order) in _NOTED:
        return
    _NOTED.add((config.variant, config.order))
    print(f"note: {config.variant} p={config.order}: the schedule's table was measured with NVRTC "
          f"{config.nvrtc} kernels; running {origin} (a `composer build` of NVRTC {config.nvrtc} in "
          "$COMPOSER_BUILD_DIR, or its CUBINs in $COMPOSER_CACHE_DIR, give the measured ones)", file=sys.stderr)


_ONE_ELEMENT_NOTED: set[tuple[str, int]] = set()


def note_one_element(variant: str, order: int, why: str, key: str = "x_pairs") -> None:
    """One line on stderr (once per variant and order in a process) when a paired (``key`` x_pairs) or
    chained (x_chain) table runs one element per block because the mesh's elements do not pair or chain
    up: the results are the same, the speed is not the table's."""
    if (variant, order) in _ONE_ELEMENT_NOTED:
        return
    _ONE_ELEMENT_NOTED.add((variant, order))
    how = "chains" if key == "x_chain" else "pairs"
    print(f"note: {variant} p={order}: the schedule's table {how} x neighbours ({key}) but {why.split(': ', 1)[-1]}; "
          "running its kernels one element per block", file=sys.stderr)


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
        "carveout": PathOption(carveout_option, "the volume kernels' preferred shared-memory carveout, percent "
                                                "of the largest (0 ... 100): the L1 is what it leaves of the SM's "
                                                "L1/shared store, at the blocks per SM that its shared memory "
                                                "holds (composer.arch.limits; a hint the driver may overrule)"),
        "sm_sides": PathOption(sm_sides_option, "with a table's side_queues: the SMs' L2 sides the queues read: "
                                                "probe (measured once per process, the default: the matrix "
                                                "form, else the reference design), lines (the matrix form), "
                                                "alternate (the SM id's parity) or zero (one queue in launch "
                                                "order)"),
        "resident": PathOption(positive_int_option, "at most this many blocks of each volume kernel per SM "
                                                    "(dynamic shared memory padded; the occupancy axis of the "
                                                    "model's calibration, composer.model: the same binary at "
                                                    "fewer resident warps)"),
    })

    @classmethod
    def scheduled_config(cls, order: int) -> FusedConfig | None:
        """The path's table at ``order`` as its schedule gives it, None where it has none (an order the
        variant lacks, or no table for it); a table that exists but does not parse raises its ConfigError."""
        if order not in cls.orders or order not in available_orders():
            return None
        schedule = load_schedule(order)
        if table_variant(cls.variant) not in schedule.paths:
            return None
        return fused_config(cls.variant, order, schedule.paths, schedule.file)

    @classmethod
    def face_links(cls, order: int, config: FusedConfig | None = None) -> bool:
        """Whether the path's table at ``order`` (``config``, else the schedule's) takes its exterior nodes
        from face links (``exterior_maps = false``), whose array it then holds beside the maps."""
        config = config or cls.scheduled_config(order)
        return config is not None and not config.exterior_maps

    @classmethod
    def face_flux_array(cls, order: int, config: FusedConfig | None = None) -> bool:
        """Whether the path stores the face flux in a face array at ``order`` (the table's ``flux =
        "array"``, ``config`` else the schedule's; without a table, the paper's rule by order)."""
        config = config or cls.scheduled_config(order)
        return order >= FACE_FLUX_ARRAY_MIN_ORDER if config is None else config.flux == "array"

    @classmethod
    def workspace_items(cls, order: int, grid: counts.Grid,
                        options: Mapping[str, Any] | None = None) -> tuple[counts.MemoryItem, ...]:
        """The index maps, and what the table (option ``config``, else the schedule's) adds: face links,
        the face flux array, the D operand."""
        config = (options or {}).get("config") or cls.scheduled_config(order)
        items = [counts.MemoryItem("index maps (32-bit)", 2, counts.face_array_bytes(order, grid, counts.INT32),
                                   "vmapM, vmapP as int32: the fused kernels' copies")]
        if cls.face_links(order, config):
            items.append(counts.MemoryItem("face links (32-bit pairs)", 1, 6 * LINK * counts.num_elements(grid),
                                           "exterior_maps = false: one link per element face (composer.fused.links)"))
        if cls.face_flux_array(order, config):
            items.append(counts.MemoryItem("face flux", 1, counts.face_array_bytes(order, grid),
                                           "fstar stored by a separate face kernel (the schedule's flux = \"array\")"))
        operand = None if config is None else kernel_d_operand(config, order)
        if operand is not None:  # beside D itself, which the problem holds
            name, matrix = operand
            items.append(counts.MemoryItem(f"D operand ({name})", 1, matrix.nbytes,
                                           "what the volume kernels read for D: the parity rows (parity) and/or "
                                           "D's k-panel copy (d_layout = \"panels\")"))
        return tuple(items)

    @classmethod
    def plan_settings(cls, order: int, **options: Any) -> str:
        """A chunked table's chunk size: its node names (``kernel#chunk``) repeat across chunk sizes of the
        same chunk count, whose nodes take other times."""
        config: FusedConfig = options.get("config") or fused_config(cls.variant, order)
        return f"chunk_elements={config.chunk_elements}" if config.chunk_elements else ""

    @classmethod
    def program(cls, order: int, num_elements: int, machine: Machine, **options: Any) -> list[KernelNode]:
        config: FusedConfig = options.get("config") or fused_config(cls.variant, order)
        nodes = []
        sources = kernel_sources(config, machine.arch)
        for k in sources:
            if k.index is None:  # the face kernel
                grid = launch_grid(k, config, num_elements, config.nq, machine.sm_count)
                nodes.append(KernelNode(k.name, "face_flux", FACE_FLUX_READS, ("fstar",), grid=grid,
                                        block=k.threads, cost=face_flux_cost(machine, config.nq, num_elements)))
        # the volume kernels chunk by chunk (one chunk of every element unless chunk_elements)
        for c, (first, end) in enumerate(chunk_ranges(num_elements, config.chunk_elements)):
            out = chunk_output(config, c)
            for k in (k for k in sources if k.index is not None):
                # a persistent kernel's plan: the resident blocks its shared memory and threads allow
                # (registers are known once compiled; the launch asks the occupancy calculator)
                resident = resident_blocks(machine.limits, k.threads, k.smem_bytes) if k.persistent else 0
                grid = launch_grid(k, config, end - first, config.nq, machine.sm_count, resident)
                reads = VOLUME_READS + (("fstar",) if config.flux == "array" else ()) + (() if k.index == 0 else (out,))
                # its volume inputs and dqdt once (twice from the second kernel on): the byte floor
                nbytes = (8 if k.index else 7) * volume_bytes(config.nq, end - first)
                nodes.append(KernelNode(chunk_node(k.name, config, c), "fused_volume", reads, (out,), grid=grid,
                                        block=k.threads, cost=roof_seconds(machine, nbytes=nbytes),
                                        resource=chunk_resources(k.name, config, c)))
        return nodes

    def __init__(self, problem: DeviceProblem, **options: Any) -> None:
        super().__init__(problem, **options)
        config: FusedConfig = self.options.get("config") or fused_config(self.variant, problem.order)
        if config.traces == "xfaces" and any(0 in k.dirs for k in config.kernels):
            # the kernels form the x-face fluxes from the staged nodes and read no vmapM there
            wrong = x_face_maps_problem(problem.mesh.face_maps[0], problem.nq)
            if wrong:
                raise ConfigError(f"{self.variant} p={problem.order}: {wrong}")
            unpaired = (config.x_pairs and x_pairs_maps_problem(problem.mesh.face_maps[1], problem.nq)) or (
                config.x_chain and x_chain_maps_problem(problem.mesh.face_maps[1], problem.nq, config.elements_per_block))
            if unpaired and self.options.get("config") is not None:  # a table the caller chose: run it as given or not at all
                raise ConfigError(f"{self.variant} p={problem.order}: {unpaired}")
            if unpaired:
                # the schedule's paired or chained table on a mesh whose elements do not pair or chain (an x
                # extent that is odd, or not a multiple of the chain): the same kernels one element per
                # block, which the plan and the launches below then follow
                note_one_element(self.variant, problem.order, unpaired, "x_chain" if config.x_chain else "x_pairs")
                config = one_element_form(config)
                self.options = {**self.options, "config": config}
        if not config.interior_maps:
            # the face fluxes address their interior traces from the element's layout and read no vmapM
            wrong = interior_maps_problem(problem.mesh.face_maps[0], problem.nq)
            if wrong:
                raise ConfigError(f"{self.variant} p={problem.order}: {wrong}")
        links = None
        if not config.exterior_maps:
            # the face fluxes take their exterior nodes from one link per element face and read no vmapP
            links, wrong = face_links(problem.mesh.face_maps[1], problem.nq)
            if wrong:
                raise ConfigError(f"{self.variant} p={problem.order}: {wrong}")
        self.config = config
        if self._carveout(config) is not None and self.options.get("resident"):
            raise ConfigError(f"{self.variant}: a carveout (the option or the table's key) and the option resident both "
                              "set the shared-memory split; give one")
        if self._carveout(config) is not None and config.volume != "box":
            raise ConfigError(f"{self.variant} p={problem.order}: a carveout applies to the box kernel; this table streams "
                              "(its kernels size their own split)")
        if config.chunk_elements and problem.num_elements >= 2**32:
            raise ConfigError(f"{self.variant} p={problem.order}: chunk_elements numbers elements in 32 bits; "
                              f"the mesh has {problem.num_elements}")
        # kernels cross-compiled by `composer build --paths ...` when the build directory holds all of
        # them from this very source; else NVRTC (disk-cached)
        build_dir = requested_build_dir(self.options.get("build_dir"))
        ready = prebuilt(config, problem.device.arch, build_dir) if build_dir else None
        self.prebuilt = ready is not None
        self.build: FusedBuild = ready or build(config, problem.device.arch, self.options.get("cache_dir"))
        self.kernel_origin = kernel_origin(self.build, build_dir if ready is not None else None)
        if config.nvrtc and not self.kernel_origin.startswith(f"nvrtc {config.nvrtc} "):
            note_compiler_mismatch(config, self.kernel_origin)
        self._modules: list[Module] = []
        self.carveouts: dict[str, dict[str, int]] = {}  # the carveout option: what it gives each volume kernel
        # by node name: kernel, grid, block, smem, face?, cluster, (first element, end) of its chunk
        self._launches: dict[str, tuple[Kernel, int, int, int, bool, int, tuple[int, int]]] = {}
        chunks = chunk_ranges(problem.num_elements, config.chunk_elements)
        for built in self.build.kernels:
            module = Module.from_cubin(built.compiled.cubin, problem.device)
            self._modules.append(module)
            kernel = module.get_kernel(built.compiled.symbol(built.name), built.signature, built.threads,
                                       built.smem_bytes)
            if config.min_blocks >= 2 and built.blocks_per_element:
                _prefer_shared_carveout(kernel)
            smem = built.smem_bytes
            if self.options.get("resident") and built.blocks_per_element:
                smem = occupancy_padding(kernel, built.threads, smem, int(self.options["resident"]))
            carveout = self._carveout(config)
            if carveout is not None and built.blocks_per_element:
                self.carveouts[built.name] = set_carveout(kernel, built.threads, smem, int(carveout))
            resident = kernel.resident_blocks(built.threads, smem) if built.persistent else 0
            face = not built.blocks_per_element
            for c, (first, end) in enumerate([(0, problem.num_elements)] if face else chunks):
                grid = launch_grid(built, config, end - first, problem.nq, problem.device.sm_count, resident)
                name = built.name if face else chunk_node(built.name, config, c)
                self._launches[name] = (kernel, grid, built.threads, smem, face, built.cluster, (first, end))
        self.vmap_m, self.vmap_p = problem.index_maps32()
        self.element_order = None  # element_bricks: the permutation the blocks take their elements from
        if config.element_bricks is not None:
            order = launch_order(problem.mesh.grid, config.element_bricks, config.x_pairs)
            self.element_order = problem.allocate(f"{self.name}.element_order", order.nbytes)
            self.element_order.copy_from(order, problem.stream)
            problem.stream.synchronize()  # the host copy is a temporary
        self.side_queue: tuple | None = None  # side_queues: the SMs' L2 sides and the queues' three counters
        if config.side_queues:
            from composer.runtime.l2_sides import sm_side_map
            from composer.runtime.smid import active_sm_ids

            kind = self.options.get("sm_sides") or "probe"
            sides, source = sm_side_map(problem.device, kind)
            ids = active_sm_ids(problem.stream.handle, problem.device)
            self.side_counts = {"sm_sides": kind, "source": source, "side0": int(sum(sides[i] == 0 for i in ids)),
                                "side1": int(sum(sides[i] == 1 for i in ids))}
            sm_side = problem.allocate(f"{self.name}.sm_side", sides.nbytes)
            sm_side.copy_from(sides, problem.stream)
            # three counters per volume kernel (16 bytes each): kernels never share a queue, whatever runs beside what
            counters = problem.allocate(f"{self.name}.work_queue", 16 * len(self._launches))
            counters.zero(problem.stream)
            problem.stream.synchronize()  # the host copy is a temporary
            self.side_queue = (sm_side, counters)
        self.face_links = None  # exterior_maps = false: (base, stride_a | stride_b << 16) per element face
        if links is not None:
            self.face_links = problem.allocate(f"{self.name}.face_links", links.nbytes)
            self.face_links.copy_from(links, problem.stream)
            problem.stream.synchronize()  # the host copy is a temporary
        self.fstar = (problem.allocate(f"{self.name}.fstar", face_bytes(problem.nq, problem.num_elements))
                      if config.flux == "array" else None)
        self.diff = problem.diff
        operand = kernel_d_operand(config, problem.order)  # the parity rows, D's k-panel copy, or both
        if operand is not None:
            name, matrix = operand
            self.diff = problem.allocate(f"{self.name}.{name}", matrix.nbytes)
            self.diff.copy_from(matrix, problem.stream)
            problem.stream.synchronize()  # the host copy is a temporary
        # a chunked table issues two launches per chunk and the events between its lanes: replayed as a
        # captured graph, so that the host's issue rate does not set the call's time
        self.capture_plan = config.chunk_elements > 0
        self.options = {**self.options, "config": config}  # the plan declares the kernels just built
        self.schedule()

    @property
    def kernels(self) -> list[Kernel]:
        """The loaded kernels in launch order (register and local-memory counts are on them), each once."""
        return list({id(k): k for k, *_ in self._launches.values()}.values())

    def launch_blocks(self) -> dict[str, int]:
        return {name: grid for name, (_, grid, *_) in self._launches.items()}

    def resident_blocks(self) -> dict[str, int]:
        return {name: kernel.resident_blocks(block, smem) for name, (kernel, _, block, smem, *_) in self._launches.items()}

    def _carveout(self, config: FusedConfig) -> int | None:
        """The volume kernels' preferred carveout: the option where given (not None), else the table's key."""
        given = self.options.get("carveout")
        return int(given) if given is not None else config.carveout

    def diagnostics(self) -> dict[str, Any]:
        """With a carveout (option or key): what it gave each volume kernel (shared memory, L1, blocks per SM)."""
        found = {"carveout": dict(self.carveouts)} if self.carveouts else {}
        if self.side_queue is not None:  # how the probed map split the SMs the kernels run on
            found["side_queues"] = dict(self.side_counts)
        return found

    def bind(self, q_ptr: int, dqdt_ptr: int) -> Mapping[str, Launcher]:
        p = self.problem
        fstar = self.fstar.ptr if self.fstar is not None else 0
        ne = p.num_elements
        u, v, w = p.ptr("u"), p.ptr("v"), p.ptr("w")
        faces = (p.ptr("nx"), p.ptr("ny"), p.ptr("nz"), p.ptr("F"))
        face_args = (q_ptr, u, v, w, self.vmap_m.ptr, self.vmap_p.ptr, *faces, fstar, ne)
        volume_args = (q_ptr, u, v, w, p.ptr("Ex"), p.ptr("Ey"), p.ptr("Ez"), self.vmap_m.ptr, self.vmap_p.ptr,
                       *faces, fstar, self.diff.ptr, dqdt_ptr)
        chunked = self.config.chunk_elements > 0

        slots = {name: n for n, name in enumerate(self._launches)}

        def args(name: str, face: bool, first: int, end: int) -> tuple:
            if face:
                return face_args
            # a chunk's launch covers elements first .. end - 1 (the kernel's e0 and bound); then the
            # permutation (element_bricks) and the face links (exterior_maps = false), as volume_signature
            head = (*volume_args, end, first) if chunked else (*volume_args, ne)
            if self.element_order is not None:
                head += (self.element_order.ptr,)
            if self.face_links is not None:
                head += (self.face_links.ptr,)
            if self.side_queue is None:
                return head
            sm_side, counters = self.side_queue
            return (*head, sm_side.ptr, counters.ptr + 16 * slots[name])

        return {name: (lambda s, k=kernel, g=grid, b=block, m=smem, a=args(name, face, *elements), c=cluster:
                       k.launch(g, b, a, m, s, cluster=c if c > 1 else None))
                for name, (kernel, grid, block, smem, face, cluster, elements) in self._launches.items()}

    def close(self) -> None:
        self.release_plan_graphs()  # before the modules whose kernels the graphs launch
        for module in self._modules:
            module.close()
        self._modules.clear()
        self._launches.clear()
        super().close()


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
