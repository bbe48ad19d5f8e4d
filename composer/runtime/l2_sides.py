"""Which L2 partition an SM is near, where lines are homed, and what a read across the partitions costs.

Why: the fused kernels at p = 7 and 15 are bound by the link between the two L2 partitions (ncu
`lts__ltcfabric2ltc_cycles_active` 95-96 %, results.md section 7), not by DRAM (75 %). Whether a kernel can
cross that link less depends on facts no datasheet gives: which SMs sit on which side, how finely the
addresses' home partitions interleave, whether an element's arrays share a home, and whether a side keeps
copies of the other's lines (on an H100, session 40: for about 11 % of them). ``L2Probe`` measures them with
one block per SM taking turns (a ticket in global memory), timing L2-only loads (``ld.global.cg``):

1. the matrix form (``latency``, ``sides_from_latency``): every SM times the same lines; the SMs split the
   same way on every two-level line (``credible_matrix_split``);
2. the reference design (``slices``, ``sides_from_reference``): one SM first-loads a pool, every other SM its
   own part; the reference's misses are set aside first (``reference_levels``);
3. homes (``homes``, ``homes_from_later``, ``home_runs``, ``element_array_homes``): two SMs of different
   sides read the same lines in turn, the later one's latencies say where each line lives;
4. ``read_bandwidth``: every SM reads lines homed on its own side, only the other side's, or all of them.

``sm_side_map`` gives the fused kernels' side queues their map. The analysis functions are NumPy only and
tested on the CPU (tests/test_l2_sides.py, including a saved H100 run); the kernels run through
``tools/l2_sides.py`` and the fused path.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import numpy as np

#: A line counts as two-level when its two latency groups are this many pooled standard deviations
#: apart, and the smaller group holds at least MIN_SIDE_FRACTION of the SMs (one slow SM is noise,
#: not a partition).
MIN_SEPARATION = 4.0
MIN_SIDE_FRACTION = 0.15
LINE_BYTES = 128  # an L2 line (four 32-byte sectors)


@dataclass(frozen=True)
class TwoGroups:
    """The best split of a set of values into a low and a high group (1-D two-means)."""

    threshold: float  # values below it are the low group
    low_mean: float
    high_mean: float
    low_count: int
    high_count: int
    separation: float  # (high_mean - low_mean) / pooled standard deviation (inf when both groups are flat)


def split_two(values: np.ndarray) -> TwoGroups:
    """The cut of the sorted values that minimizes the two groups' summed squared deviations."""
    v = np.sort(np.asarray(values, dtype=float).ravel())
    n = v.size
    if n < 2:
        raise ValueError("split_two needs at least two values")
    csum, csq = np.cumsum(v), np.cumsum(v * v)
    k = np.arange(1, n)  # the low group is v[:k]
    low_sum, low_sq = csum[:-1], csq[:-1]
    high_sum, high_sq = csum[-1] - low_sum, csq[-1] - low_sq
    sse = (low_sq - low_sum**2 / k) + (high_sq - high_sum**2 / (n - k))
    best = int(np.argmin(sse))
    cut = best + 1
    low, high = v[:cut], v[cut:]
    pooled = float(np.sqrt(max(sse[best], 0.0) / max(n - 2, 1)))
    gap = float(high.mean() - low.mean())
    separation = gap / pooled if pooled > 0 else (float("inf") if gap > 0 else 0.0)
    return TwoGroups(threshold=float((low[-1] + high[0]) / 2), low_mean=float(low.mean()),
                     high_mean=float(high.mean()), low_count=int(low.size), high_count=int(high.size),
                     separation=separation)


def is_two_level(groups: TwoGroups, n: int) -> bool:
    """Whether a line's latencies over ``n`` SMs show two partitions rather than noise."""
    return (groups.separation >= MIN_SEPARATION
            and min(groups.low_count, groups.high_count) >= MIN_SIDE_FRACTION * n)


@dataclass
class SideMap:
    """The SMs' sides and the probed lines' homes, from a latency matrix [SM, line] in cycles."""

    smids: list[int]
    side: list[int]  # per SM (same order as smids): 0 or 1; all 0 when the L2 shows one level
    two_level_lines: int  # lines whose latencies split into two partitions
    lines: int
    agreement: float  # mean fraction of SMs a two-level line puts on the side the vote gave them
    home: list[int | None] = field(default_factory=list)  # per line: the side it is near to, None if one level
    near_cycles: float = float("nan")  # median latency of an SM to lines of its own side
    far_cycles: float = float("nan")  # ... to lines of the other side

    @property
    def partitioned(self) -> bool:
        return self.two_level_lines > 0

    def members(self, side: int) -> list[int]:
        return [s for s, d in zip(self.smids, self.side) if d == side]

    def as_dict(self) -> dict:
        return {"partitioned": self.partitioned, "lines": self.lines, "two_level_lines": self.two_level_lines,
                "agreement": self.agreement, "near_cycles": self.near_cycles, "far_cycles": self.far_cycles,
                "sides": {str(d): self.members(d) for d in (0, 1)},
                "homes": {str(d): sum(1 for h in self.home if h == d) for d in (0, 1)}}


def sides_from_latency(latency: np.ndarray, smids: list[int]) -> SideMap:
    """Group the SMs by the lines they reach quickly.

    Each line's latencies over the SMs are split in two (``split_two``); a two-level line names a
    near group. The groups of different lines are the same two sides up to a swap (a line homed on
    side 1 is near to side 1's SMs), so each line's near mask is aligned with the first two-level
    line's and the sides are the majority vote. Side 0 holds the SM with the smallest id.
    """
    lat = np.asarray(latency, dtype=float)
    n_sm, n_lines = lat.shape
    if n_sm != len(smids):
        raise ValueError(f"latency has {n_sm} rows for {len(smids)} SM ids")
    masks = []  # per two-level line: the SMs near to it
    line_of = []
    for line in range(n_lines):
        col = lat[:, line]
        groups = split_two(col)
        if is_two_level(groups, n_sm):
            masks.append(col < groups.threshold)
            line_of.append(line)
    if not masks:
        return SideMap(list(smids), [0] * n_sm, 0, n_lines, 1.0, [None] * n_lines)
    ref = masks[0]
    aligned = [m if np.mean(m == ref) >= 0.5 else ~m for m in masks]
    votes = np.mean(aligned, axis=0)  # fraction of lines on which the SM agrees with ref's near group
    side = np.where(votes >= 0.5, 0, 1)
    first = int(np.argmin(smids))
    if side[first] == 1:
        side = 1 - side
    agreement = float(np.mean([max(np.mean((m == (side == 0))), np.mean((m == (side == 1)))) for m in masks]))
    home: list[int | None] = [None] * n_lines
    near, far = [], []
    for m, line in zip(masks, line_of):
        h = 0 if np.mean(m == (side == 0)) >= 0.5 else 1
        home[line] = h
        near.extend(lat[side == h, line].tolist())
        far.extend(lat[side != h, line].tolist())
    return SideMap(list(smids), [int(s) for s in side], len(masks), n_lines, agreement, home,
                   statistics.median(near), statistics.median(far) if far else float("nan"))


@dataclass
class ReferenceSides:
    """The SMs' sides from the reference design (``sides_from_reference``) and what it saw on the way."""

    smids: list[int]
    side: list[int]
    partitioned: bool
    separation: float  # of the SMs' near-minus-far differences (split_two), 0 when not partitioned
    near_cycles: float  # median first-load cycles of an SM on lines homed on its side
    far_cycles: float  # ... on lines homed on the other side and not read by its side before
    copy_fraction: float  # of the lines homed on the other side that the reference's side had read: read fast
    #: SMs with no verdict (on side 0 in ``side``): their part of the pool held no line the reference hit near
    #: or no line it hit far (its misses are neither)
    unmeasured: list[int] = field(default_factory=list)

    def members(self, side: int) -> list[int]:
        return sorted(s for s, d in zip(self.smids, self.side) if d == side)

    def as_dict(self) -> dict:
        return {"partitioned": self.partitioned, "separation": self.separation, "near_cycles": self.near_cycles,
                "far_cycles": self.far_cycles, "copy_fraction": self.copy_fraction,
                "sides": {str(d): self.members(d) for d in (0, 1)}, "unmeasured": sorted(self.unmeasured)}


#: The smallest near/far gap (cycles) the three-level reading accepts, and how many times that gap the miss level
#: must stand above the far one. Why: the partition link adds 35-41 cycles on the H100 (near 267-273, far
#: 306-308, misses about 460: session 40), while the slices of one partition differ by about 13 (a near group's
#: own sub-levels, 260 against 273), which must not pass for near and far.
MIN_NEAR_FAR_GAP = 20.0
MISS_GAP_RATIO = 2.0


def reference_levels(ref_first: np.ndarray) -> tuple[np.ndarray, np.ndarray, TwoGroups]:
    """The reference's lines near it and far from it (two masks over the pool) and the split that made them.

    The reference's first loads can show three levels, not two: near and far L2 hits, and misses. On an H100
    (session 40, ``docs/data/h100_s40/call2``) a quarter of the pool's lines, in 4-KiB runs, took about 460
    cycles against 267 near and 308 far, though the buffer had just been zeroed; the first split then
    separates misses from hits. So where the low group of that split is itself two-level (``is_two_level``)
    with a near/far gap of at least MIN_NEAR_FAR_GAP cycles, and the high group stands MISS_GAP_RATIO times
    that gap above it, the high group is taken for misses and left out of both masks. Once only. Fewer than
    two measured values: empty masks (no split)."""
    values = np.asarray(ref_first, dtype=float)
    measured = values >= 0
    if measured.sum() < 2:
        empty = np.zeros(values.shape, dtype=bool)
        return empty, empty.copy(), TwoGroups(0.0, float("nan"), float("nan"), int(measured.sum()), 0, 0.0)
    groups = split_two(values[measured])
    low = measured & (values < groups.threshold)
    if low.sum() >= 4:
        inner = split_two(values[low])
        gap = inner.high_mean - inner.low_mean
        if (is_two_level(inner, int(low.sum())) and gap >= MIN_NEAR_FAR_GAP
                and groups.high_mean - inner.high_mean >= MISS_GAP_RATIO * gap):
            near = low & (values < inner.threshold)
            return near, low & ~near, inner
    near = measured & (values < groups.threshold)
    return near, measured & ~near, groups


def sides_from_reference(ref_first: np.ndarray, block_first: list[np.ndarray], block_lines: list[np.ndarray],
                         smids: list[int]) -> ReferenceSides:
    """The SMs' sides from first loads that no SM of the same side made before them.

    Block 0 (the reference) first-loads every line of a pool; each other block then first-loads its own
    disjoint part of it (``block_lines[b]``: indices into the pool). The reference's lines split into those
    near it (homed on its side) and far. A block on the reference's side finds the near ones near; one on
    the other side finds them far and the reference's far ones near (homed on its side, and read by nobody
    on its side before). So each block's mean on the reference's near lines minus its mean on the far ones
    is about 0 or below on the reference's side and about the near/far gap on the other, whether or not a
    partition keeps copies of the other's lines (a copy the reference's read left on its side only speeds
    up its own side's reads of its far lines: ``copy_fraction``). Why not one set of lines for every SM in
    turn: the first SM of a side to read a far line leaves a copy on its side, and its side's later SMs
    then find it near."""
    ref_near, ref_far, groups = reference_levels(ref_first)
    n = len(smids)
    diffs, keep = [], []
    for b in range(1, n):
        idx = np.asarray(block_lines[b], dtype=np.int64)
        lat = np.asarray(block_first[b], dtype=float)
        if idx.size == 0 or np.any(lat < 0):
            continue
        near, far = lat[ref_near[idx]], lat[ref_far[idx]]
        if near.size and far.size:
            diffs.append(float(near.mean() - far.mean()))
            keep.append(b)
    side = [0] * n
    if not is_two_level(groups, int((ref_near | ref_far).sum())) or len(diffs) < 2:
        return ReferenceSides(list(smids), side, False, 0.0, float("nan"), float("nan"), float("nan"))
    split = split_two(np.asarray(diffs))
    if not is_two_level(split, len(diffs) + 1):
        return ReferenceSides(list(smids), side, False, split.separation, float("nan"), float("nan"), float("nan"))
    for b, d in zip(keep, diffs):
        side[b] = 1 if d >= split.threshold else 0
    own, other, copies = [], [], []
    for b in keep:
        idx = np.asarray(block_lines[b], dtype=np.int64)
        lat = np.asarray(block_first[b], dtype=float)
        homed_here, homed_there = (ref_near[idx], ref_far[idx]) if side[b] == 0 else (ref_far[idx], ref_near[idx])
        own.extend(lat[homed_here].tolist())
        if side[b] == 1:
            other.extend(lat[homed_there].tolist())
    near_c, far_c = statistics.median(own), statistics.median(other) if other else float("nan")
    middle = (near_c + far_c) / 2
    for b in keep:
        if side[b] == 0:
            lat = np.asarray(block_first[b], dtype=float)[ref_far[np.asarray(block_lines[b], dtype=np.int64)]]
            copies.extend((lat < middle).tolist())
    unmeasured = [int(smids[b]) for b in range(1, n) if b not in set(keep)]
    return ReferenceSides(list(smids), side, True, split.separation, near_c, far_c,
                          float(np.mean(copies)) if copies else float("nan"), unmeasured)


def reference_pool(n_sm: int, per_block: int, base_bytes: int = 0) -> tuple[np.ndarray, list[np.ndarray]]:
    """The reference design's lines: a pool of ``n_sm * per_block`` consecutive 128-byte lines from
    ``base_bytes`` (word offsets), block 0 timing all of them first and block b its own part b."""
    pool = (base_bytes + np.arange(n_sm * per_block, dtype=np.int64) * LINE_BYTES) // 8
    parts = [np.arange(b * per_block, (b + 1) * per_block) for b in range(n_sm)]
    parts[0] = np.arange(pool.size)
    return pool, parts


def homes_from_later(later_first: np.ndarray, later_side: int) -> list[int | None]:
    """The lines' homes from the first loads of the second of two SMs of different sides to read them
    (the first one's reads made every line L2-resident at its home, and left copies on the first one's
    side only): near (homed on ``later_side``) or far; None for a line that missed (``reference_levels``:
    a third, slower level) and for every line when they do not split."""
    near, far, groups = reference_levels(later_first)
    if not is_two_level(groups, int((near | far).sum())):
        return [None] * len(later_first)
    return [later_side if n else (1 - later_side if f else None) for n, f in zip(near, far)]


def element_array_homes(home: np.ndarray, names: list[str]) -> dict:
    """Whether an element's arrays share an L2 home: what an assignment of elements to the side their data
    is homed on (against the far misses, 70 % of p = 7's link sectors) needs.

    ``home[a, e, l]``: the side line ``l`` of element ``e``'s part of array ``names[a]`` is homed on, -1
    unknown. Per array: the share of elements whose known lines sit at least 90 % on one side (``pure``), the
    mean share of an element's lines on its minority side, and the share of its lines on side 1. Across
    arrays (over the elements where every array has a majority side, ``elements_all_known``; a tie has none):
    the share of elements whose arrays' majority sides all agree, beside what independent arrays
    would give (the product of each array's side shares, summed over the sides), and each pair's agreement."""
    home = np.asarray(home)
    n_arrays, n_elem, _ = home.shape
    known = home >= 0
    ones = np.where(known, home == 1, False).sum(axis=2)
    counts = known.sum(axis=2)
    valid = counts > 0
    share1 = np.divide(ones, counts, out=np.full(ones.shape, np.nan), where=valid)
    majority = np.where(valid & (share1 != 0.5), (share1 > 0.5).astype(int), -1)  # a tie has no majority
    minority = np.minimum(share1, 1 - share1)
    per_array = {}
    for a, name in enumerate(names):
        v = valid[a]
        per_array[name] = {"elements": int(v.sum()), "pure": float(np.mean(minority[a][v] <= 0.1)) if v.any() else None,
                           "minority_share": float(np.mean(minority[a][v])) if v.any() else None,
                           "side1_share": float(np.mean(share1[a][v])) if v.any() else None}
    every = (majority >= 0).all(axis=0)
    agree = (majority[:, every] == majority[:1, every]).all(axis=0) if every.any() else np.zeros(0, bool)
    p1 = np.array([np.mean(majority[a][every] == 1) if every.any() else np.nan for a in range(n_arrays)])
    independent = float(np.prod(p1) + np.prod(1 - p1)) if every.any() else None
    pairs = {f"{names[a]}/{names[b]}": float(np.mean(majority[a][every] == majority[b][every]))
             for a in range(n_arrays) for b in range(a + 1, n_arrays)} if every.any() else {}
    return {"arrays": per_array, "elements": int(n_elem), "elements_all_known": int(every.sum()),
            "all_agree": float(np.mean(agree)) if agree.size else None, "all_agree_if_independent": independent,
            "pairs": pairs}


def home_runs(home: list[int | None], stride_bytes: int) -> dict[str, float | None]:
    """How finely the homes of consecutive probed lines interleave: the lengths in bytes of the runs of
    lines on one side (lines without a home end a run). Small runs against an element's bytes mean
    that no assignment of elements to SMs keeps an element's reads on one side."""
    runs, current, last = [], 0, None
    for h in home:
        if h is None:
            if current:
                runs.append(current)
            current, last = 0, None
            continue
        if h == last:
            current += 1
        else:
            if current:
                runs.append(current)
            current, last = 1, h
    if current:
        runs.append(current)
    if not runs:
        return {"runs": 0, "min_bytes": None, "median_bytes": None, "max_bytes": None}
    return {"runs": len(runs), "min_bytes": min(runs) * stride_bytes,
            "median_bytes": float(statistics.median(runs)) * stride_bytes, "max_bytes": max(runs) * stride_bytes}


def element_home_split(home: list[int | None], stride_bytes: int, element_bytes: int) -> float | None:
    """Mean over the probed windows of ``element_bytes`` of the fraction of their lines homed on the
    window's minority side: 0 when whole elements sit on one side, about 0.5 when every element is
    spread over both. Only for consecutive probes (``stride_bytes`` = LINE_BYTES)."""
    per = max(1, element_bytes // stride_bytes)
    fractions = []
    for start in range(0, len(home) - per + 1, per):
        window = [h for h in home[start:start + per] if h is not None]
        if len(window) < per // 2:
            continue
        ones = sum(window)
        fractions.append(min(ones, len(window) - ones) / len(window))
    return float(np.mean(fractions)) if fractions else None


# --- the kernels ---------------------------------------------------------------------------------

#: One block per SM (the launch asks for more than half an SM's shared memory), the blocks in turn:
#: block b spins (with nanosleep, so that the waiting blocks put little traffic on the L2) until the
#: ticket reads b. Its thread 0 then times, for each line, one load and then ``repeats`` dependent
#: loads; the loads are L2-only (.cg) and chained through the value read (the buffer is zero), and the
#: clock is read after an instruction that consumes the last value (in-order issue waits for it).
#: A block whose turn never comes within ``spin_limit`` cycles, or whose SM ``active[smid]`` leaves out,
#: writes -1 (the first use probes every SM on a few lines; the second two SMs on many).
_LATENCY_SOURCE = r"""
extern "C" __global__ void __launch_bounds__(32) l2_latency(const unsigned long long* buf,
        const long long* offsets, const int* starts, int repeats, unsigned int* ticket, float* first_cycles,
        float* repeat_cycles, unsigned int* smids, const unsigned char* active, long long spin_limit) {
    if (threadIdx.x != 0) return;
    unsigned int smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    smids[blockIdx.x] = smid;
    bool measure = active[smid] != 0;
    long long t0 = clock64();
    bool turn = true;
    while (*(volatile unsigned int*)ticket != blockIdx.x) {
        if (clock64() - t0 > spin_limit) { turn = false; break; }
        __nanosleep(500);
    }
    __shared__ volatile unsigned long long keep;  // each loaded value is stored here before the clock is read
    // block b times the lines offsets[starts[b]] ... offsets[starts[b + 1] - 1], its results at the same places
    for (int l = starts[blockIdx.x]; l < starts[blockIdx.x + 1]; ++l) {
        if (!turn || !measure) { first_cycles[l] = -1.f; repeat_cycles[l] = -1.f; continue; }
        unsigned long long p = (unsigned long long)(buf + offsets[l]);
        unsigned long long v;
        long long a = clock64();
        asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
        keep = v;
        long long b = clock64();
        p += v;
        for (int r = 0; r < repeats; ++r) {
            asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
            p += v;
        }
        keep = p;
        long long c = clock64();
        first_cycles[l] = (float)(b - a);
        repeat_cycles[l] = repeats > 0 ? (float)(c - b) / repeats : 0.f;
    }
    __threadfence();
    if (turn) atomicAdd(ticket, 1u);
}

// Every thread reads 16 bytes of a line (8 threads per 128-byte line) from the lines its SM's mode
// names: mode 0 the lines homed on its own side, 1 the other side's, 2 all of them (own then other).
// lines[] holds side 0's lines, then side 1's; side_of_sm[smid] is 0 or 1 (2: not probed, reads all).
extern "C" __global__ void __launch_bounds__(256) l2_read(const double2* buf, const int* lines, int n0, int n1,
        const unsigned char* side_of_sm, int mode, int passes, double* sink) {
    unsigned int smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    int side = side_of_sm[smid];
    int lo = 0, n = n0 + n1;
    if (side < 2 && mode < 2) {
        bool own = (mode == 0);
        bool zero = (side == 0) == own;
        lo = zero ? 0 : n0;
        n = zero ? n0 : n1;
    }
    // the blocks on one SM: blockIdx.x / gridDim-ordinal is not per SM, so each block strides the
    // list from its own start: every line of the list is read by every block, passes times
    const int sub = threadIdx.x & 7, group = threadIdx.x >> 3, groups = blockDim.x >> 3;
    double acc = 0.0;
    int start = (blockIdx.x * groups) % (n > 0 ? n : 1);
    for (int pass = 0; pass < passes; ++pass) {
        for (int i = group; i < n; i += groups) {
            int line = lines[lo + (start + i) % n];
            double2 v;
            asm volatile("ld.global.cg.v2.f64 {%0, %1}, [%2];" : "=d"(v.x), "=d"(v.y)
                         : "l"(buf + (long long)line * 8 + sub));
            acc += v.x + v.y;
        }
    }
    if (acc == 12345.0) sink[0] = acc;  // never true for the zero buffer: keeps the loads
}
"""

LATENCY_ENTRY, READ_ENTRY = "l2_latency", "l2_read"
LATENCY_THREADS, READ_THREADS = 32, 256
READ_BLOCKS_PER_SM = 8


def fine_offsets(lines: int) -> np.ndarray:
    """Word offsets (8-byte) of ``lines`` consecutive 128-byte lines: the home interleave at line grain."""
    return np.arange(lines, dtype=np.int64) * (LINE_BYTES // 8)


def coarse_offsets(lines: int, stride_bytes: int, base_bytes: int) -> np.ndarray:
    """Word offsets of ``lines`` lines ``stride_bytes`` apart from ``base_bytes``."""
    return (base_bytes + np.arange(lines, dtype=np.int64) * stride_bytes) // 8


def ticket_spin_limit(n_sm: int, nlines: int, repeats: int) -> int:
    """Cycles a block waits for its turn before it gives up: every line of the blocks before it (``n_sm``
    blocks of ``nlines``, or one of all the lines) at 2000 cycles a load."""
    return int(n_sm * nlines * (repeats + 1) * 2000 + 10**8)


def one_block_per_sm_smem(max_smem_per_sm: int) -> int:
    """Dynamic shared memory that lets only one probe block on an SM (more than half of it)."""
    return max_smem_per_sm // 2 + 1024


# --- running them --------------------------------------------------------------------------------

SMID_SLOTS = 1024  # above any %nsmid of current GPUs
READ_MODES = {"own": 0, "other": 1, "all": 2}
MIN_READ_BYTES = 16 * 2**30  # per launch: about 2 ms at L2 rates, against a few µs of launch


@dataclass
class LatencyProbe:
    """What ``L2Probe.latency`` read back: per probing block its SM and per line its cycles (-1: skipped)."""

    smids: list[int]
    first: np.ndarray  # [block, line]: the first load of the line
    repeat: np.ndarray  # [block, line]: the mean of the dependent loads after it

    def measured(self) -> tuple[list[int], np.ndarray, np.ndarray]:
        """The rows of the SMs that measured every line (sorted by SM id)."""
        keep = [b for b in range(len(self.smids)) if np.all(self.repeat[b] >= 0)]
        keep.sort(key=lambda b: self.smids[b])
        return [self.smids[b] for b in keep], self.first[keep], self.repeat[keep]


def read_bytes(mode: str, lines: tuple[int, int], sms: tuple[int, int, int], blocks_per_sm: int) -> int:
    """Bytes one pass of ``l2_read`` reads: ``sms`` = SMs on side 0, side 1, and not probed (they read all)."""
    n0, n1 = lines
    c0, c1, c2 = sms
    per_sm = {"own": c0 * n0 + c1 * n1, "other": c0 * n1 + c1 * n0, "all": (c0 + c1) * (n0 + n1)}[mode]
    return (per_sm + c2 * (n0 + n1)) * blocks_per_sm * LINE_BYTES


class L2Probe:
    """The two kernels, compiled by the device's NVRTC and loaded once (``close`` unloads them)."""

    def __init__(self, device) -> None:  # noqa: ANN001 - a composer.runtime.Device
        from composer.runtime.module import Module
        from composer.runtime.nvrtc import compile_cuda
        from composer.runtime.params import params

        self.device = device
        compiled = compile_cuda(_LATENCY_SOURCE, "l2_sides.cu", arch=device.arch,
                                entry_points=[LATENCY_ENTRY, READ_ENTRY])
        self.module = Module.from_cubin(compiled.cubin, device)
        self._latency = self.module.get_kernel(compiled.symbol(LATENCY_ENTRY), params(
            "buf:ptr offsets:ptr starts:ptr repeats:i32 ticket:ptr first:ptr repeat:ptr smids:ptr active:ptr "
            "spin:i64"), LATENCY_THREADS)
        self._read = self.module.get_kernel(compiled.symbol(READ_ENTRY), params(
            "buf:ptr lines:ptr n0:i32 n1:i32 side:ptr mode:i32 passes:i32 sink:ptr"), READ_THREADS)

    def close(self) -> None:
        self.module.close()

    def slices(self, buffer, slices: list[np.ndarray], repeats: int = 2,  # noqa: ANN001
               active_smids: list[int] | None = None) -> tuple[list[int], list[np.ndarray], list[np.ndarray]]:
        """Block b (of one per SM, in turn: ``slices[b]`` for b < the SM count, the others none) times the
        lines at ``slices[b]`` (8-byte word offsets into ``buffer``); only the SMs ``active_smids`` when
        given. Returns per block its SM and its lines' first and repeat cycles (-1: not measured). One
        block per SM: all resident, so the ticket order cannot deadlock."""
        from composer.runtime import DeviceBuffer, Stream

        dev = self.device
        n_sm = dev.sm_count
        parts = [np.asarray(slices[b], dtype=np.int64) if b < len(slices) else np.zeros(0, np.int64)
                 for b in range(n_sm)]
        starts = np.concatenate([[0], np.cumsum([part.size for part in parts])]).astype(np.int32)
        total = int(starts[-1])
        active = np.zeros(SMID_SLOTS, dtype=np.uint8)
        active[list(range(SMID_SLOTS)) if active_smids is None else list(active_smids)] = 1
        stream = Stream(dev)
        bufs: list = []
        try:
            off = DeviceBuffer.from_numpy(np.concatenate(parts) if total else np.zeros(1, np.int64), stream, dev)
            start = DeviceBuffer.from_numpy(starts, stream, dev)
            ticket = DeviceBuffer(4, dev)
            first, rep = DeviceBuffer(4 * max(total, 1), dev), DeviceBuffer(4 * max(total, 1), dev)
            smids = DeviceBuffer(4 * n_sm, dev)
            act = DeviceBuffer.from_numpy(active, stream, dev)
            bufs = [off, start, ticket, first, rep, smids, act]
            ticket.zero(stream)
            self._latency.launch(n_sm, args=(buffer, off, start, repeats, ticket, first, rep, smids, act,
                                             ticket_spin_limit(1, total, repeats)),
                                 shared=one_block_per_sm_smem(dev.max_smem_optin), stream=stream)
            stream.synchronize()
            f = first.to_numpy(max(total, 1), np.float32, stream=stream).astype(float)
            r = rep.to_numpy(max(total, 1), np.float32, stream=stream).astype(float)
            ids = [int(x) for x in smids.to_numpy(n_sm, np.uint32, stream=stream)]
        finally:
            for b in bufs:
                b.free()
            stream.close()
        return ids, [f[starts[b]:starts[b + 1]] for b in range(n_sm)], [r[starts[b]:starts[b + 1]] for b in range(n_sm)]

    def latency(self, buffer, offsets: np.ndarray, repeats: int = 8,  # noqa: ANN001
                active_smids: list[int] | None = None) -> LatencyProbe:
        """Every SM in turn (or only ``active_smids``) times the same lines ``offsets``: the matrix form."""
        ids, first, rep = self.slices(buffer, [offsets] * self.device.sm_count, repeats, active_smids)
        return LatencyProbe(ids, np.vstack(first), np.vstack(rep))

    def homes(self, buffer, offsets: np.ndarray, refs: tuple[int, int],  # noqa: ANN001
              refs_sides: tuple[int, int] = (0, 1)) -> tuple[list[int | None], list[int]]:
        """The homes of the lines at ``offsets`` (word offsets into ``buffer``, a DeviceBuffer or a device
        address): the SMs ``refs`` (on sides ``refs_sides``) first-load every line in block order, and the
        later one's loads split near/far (``homes_from_later``). Returns the homes and the SMs in the order
        they read; all None when the two did not both measure."""
        ids, first, _ = self.slices(buffer, [offsets] * self.device.sm_count, repeats=0, active_smids=list(refs))
        order = [b for b, s in enumerate(ids) if s in refs and np.all(first[b] >= 0)]
        if len(order) < 2:
            return [None] * len(offsets), []
        later = max(order[:2])
        later_side = refs_sides[list(refs).index(ids[later])]
        return homes_from_later(first[later], later_side), [ids[b] for b in sorted(order[:2])]

    def read_bandwidth(self, buffer, lines_by_side: tuple[list[int], list[int]],  # noqa: ANN001
                       side_of_smid: dict[int, int], repeats: int = 7) -> dict[str, dict[str, float]]:
        """L2 read bandwidth (bytes/s) of ``READ_BLOCKS_PER_SM`` blocks per SM reading, per mode, the lines
        homed on their SM's side (``own``), on the other (``other``) or all of them (``all``)."""
        from composer.runtime import DeviceBuffer, Event, Stream

        dev = self.device
        side = np.full(SMID_SLOTS, 2, dtype=np.uint8)
        for smid, d in side_of_smid.items():
            side[smid] = d
        counts = [sum(1 for d in side_of_smid.values() if d == k) for k in (0, 1)]
        sms = (counts[0], counts[1], max(dev.sm_count - counts[0] - counts[1], 0))
        n0, n1 = len(lines_by_side[0]), len(lines_by_side[1])
        stream = Stream(dev)
        start, stop = Event(dev), Event(dev)
        bufs: list = []
        try:
            lines = DeviceBuffer.from_numpy(np.asarray(list(lines_by_side[0]) + list(lines_by_side[1]),
                                                       dtype=np.int32), stream, dev)
            sides = DeviceBuffer.from_numpy(side, stream, dev)
            sink = DeviceBuffer(8, dev)
            bufs = [lines, sides, sink]
            grid = READ_BLOCKS_PER_SM * dev.sm_count
            out: dict[str, dict[str, float]] = {}
            for name, mode in READ_MODES.items():
                per_pass = read_bytes(name, (n0, n1), sms, READ_BLOCKS_PER_SM)
                passes = max(1, int(MIN_READ_BYTES // max(per_pass, 1)))
                self._read.launch(grid, args=(buffer, lines, n0, n1, sides, mode, 1, sink), stream=stream)  # warm
                rates = []
                for _ in range(repeats):
                    start.record(stream)
                    self._read.launch(grid, args=(buffer, lines, n0, n1, sides, mode, passes, sink), stream=stream)
                    stop.record(stream)
                    stop.synchronize()
                    rates.append(per_pass * passes / (start.elapsed_ms(stop) * 1e-3))
                out[name] = {"median_Bps": statistics.median(rates), "max_Bps": max(rates), "passes": float(passes)}
            return out
        finally:
            for b in bufs:
                b.free()
            stream.close()


# --- the map the fused kernels' side queues read (FusedConfig.side_queues) -------------------------

SIDE_MAP_KINDS = ("probe", "lines", "alternate", "zero")
SIDE_MAP_LINES = 64  # per SM in the reference design: about 10 ms of first loads, 32 lines each side
MATRIX_LINES = 64  # of each set (line-grain and 8-KiB strided) in the matrix form: about 25 ms
MATRIX_STRIDE = 8192
_SIDE_MAPS: dict[tuple, tuple[np.ndarray, str]] = {}


def side_table(smids: list[int], side: list[int]) -> np.ndarray:
    """The byte-per-%smid table (SMID_SLOTS) of a measured split; SMs not measured on side 0."""
    table = np.zeros(SMID_SLOTS, dtype=np.uint8)
    table[np.asarray(smids, dtype=np.int64)] = np.asarray(side, dtype=np.uint8)
    return table


def _reference_split(probe: "L2Probe", device) -> tuple[list[int], list[int]] | None:  # noqa: ANN001
    """The reference design's split (``sides_from_reference``), None where it finds one side."""
    from composer.runtime import DeviceBuffer

    pool, parts = reference_pool(device.sm_count, SIDE_MAP_LINES)
    buffer = DeviceBuffer(int(pool[-1]) * 8 + LINE_BYTES, device)
    try:
        buffer.zero()
        smids, first, _ = probe.slices(buffer, [pool[p] for p in parts], repeats=0)
    finally:
        buffer.free()
    sides = sides_from_reference(first[0], first, parts, smids)
    return (sides.smids, sides.side) if sides.partitioned else None


def _matrix_split(probe: "L2Probe", device) -> tuple[list[int], list[int]] | None:  # noqa: ANN001
    """The matrix form's split (every SM times the same lines in turn; ``sides_from_latency`` on the first
    loads, else the repeats), None where neither shows two levels. Why it comes first: on two H100s
    (session 40) the lines that kept two levels in the matrix form split the SMs with agreement 0.997-1.0
    (62 / 70 and 64 / 68, near 272-300 against far 307-335 cycles), while the reference design, before
    ``reference_levels`` set the reference's misses aside, put fewer than 15 % of the SMs apart on one and
    split the other 99 / 33 (re-analysed, that run's reference design agrees with its matrix form on every
    SM). The matrix form has been right on every GPU it ran on; the reference design only since its fix."""
    from composer.runtime import DeviceBuffer

    offsets = np.concatenate([fine_offsets(MATRIX_LINES),
                              coarse_offsets(MATRIX_LINES, MATRIX_STRIDE, MATRIX_LINES * LINE_BYTES)])
    buffer = DeviceBuffer(MATRIX_LINES * (LINE_BYTES + MATRIX_STRIDE), device)
    try:
        buffer.zero()
        ids, first, repeat = probe.latency(buffer, offsets).measured()
    finally:
        buffer.free()
    if len(ids) < 2:
        return None
    for matrix in (first, repeat):
        sides = sides_from_latency(matrix, ids)
        if credible_matrix_split(sides):
            return sides.smids, sides.side
    return None


#: The matrix form's split counts only on this many two-level lines agreeing this well: one noisy line is a
#: complete map with agreement 1.0 (the H100s of session 40 showed 10-27 two-level lines of 128, 0.997-1.0).
MIN_TWO_LEVEL_LINES = 4
MIN_AGREEMENT = 0.95


def credible_matrix_split(sides: SideMap) -> bool:
    """Whether a matrix-form split rests on enough lines that agree (MIN_TWO_LEVEL_LINES, MIN_AGREEMENT)."""
    return sides.partitioned and sides.two_level_lines >= MIN_TWO_LEVEL_LINES and sides.agreement >= MIN_AGREEMENT


def sm_side_map(device, kind: str = "probe") -> tuple[np.ndarray, str]:  # noqa: ANN001 - a composer.runtime.Device
    """A byte per %smid (SMID_SLOTS of them): the L2 side each SM is near, for the fused kernels' side
    queues, and where the split came from (``reference``, ``lines``, ``none``, or the kind itself).
    ``probe``: measured on ``device`` once per process, by the matrix form (``_matrix_split``), else the
    reference design (``sides_from_reference``); all zero (``none``) when neither shows two levels.
    ``lines``: the matrix form alone. ``alternate``: the SM id's parity, an arbitrary split of about the
    same size (what the measured map is worth beside it); ``zero``: every SM on side 0, so that the blocks
    take their work in launch order through one queue (the queue's own cost)."""
    if kind not in SIDE_MAP_KINDS:
        raise ValueError(f"expected one of {SIDE_MAP_KINDS}, got {kind!r}")
    if kind == "zero":
        return np.zeros(SMID_SLOTS, dtype=np.uint8), kind
    if kind == "alternate":
        return (np.arange(SMID_SLOTS) % 2).astype(np.uint8), kind
    key = (kind, device.name, int(getattr(device, "ordinal", 0)), getattr(device, "active_sms", None))
    if key not in _SIDE_MAPS:
        probe = L2Probe(device)
        try:
            split, source = _matrix_split(probe, device), "lines"
            if split is None and kind == "probe":
                split, source = _reference_split(probe, device), "reference"
        finally:
            probe.close()
        _SIDE_MAPS[key] = (side_table(*split), source) if split else (np.zeros(SMID_SLOTS, dtype=np.uint8), "none")
    table, source = _SIDE_MAPS[key]
    return table.copy(), source
