"""The carrier tiles and MMA shapes a carrier sweep tries beside the schedule's.

Why these: the carrier is the one GEMM of GEMM_FUSED that must run our CuTe mainloop (cuBLAS has
no epilogue), so its rate decides the path at large order. On the H200 at Nq = 512, ncu showed
cuBLAS's three FP64 GEMMs at 91-93 % of the DMMA pipe with 128-thread blocks and the 16x8x8 DMMA
(tiles 64x128x16 3-stage, 64x64x16 4-stage, 128x64x16 3-stage, 2x2 warps), where our 16x8x4
128x128 and 64x64 tiles ran 65-75 % (session 7, docs/results.md section 8b). Building the y carrier
on cuBLAS's y tile with 16x8x8 took p = 511 from 1.010 to 0.976 x GEMM. So the sweep tries the
library's tiles with each shape the architecture has, and a neighbourhood of the schedule's tile
(one stage fewer and more, bk halved and doubled) with the schedule's shape.

A tile that does not validate for a shape or arch (warp tile not a multiple of the MMA, shared
memory over the block limit) is dropped where the candidates are formed, not here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from composer.arch.mma import arch_number
from composer.epilogues.kernels import DEFAULT_STORE_GROUP

#: cuBLAS's FP64 tiles on sm_90 at Nq = 512 (ncu kernel names of GEMM at p = 511: tn 64x128x16
#: stage3, nn 64x64x16 stage4, nn 128x64x16 stage3, warps 2x2x1, tensor 16x8x8).
LIBRARY_TILES: tuple[dict[str, int], ...] = (
    {"bm": 64, "bn": 64, "bk": 16, "warps_m": 2, "warps_n": 2, "stages": 4},
    {"bm": 64, "bn": 128, "bk": 16, "warps_m": 2, "warps_n": 2, "stages": 3},
    {"bm": 128, "bn": 64, "bk": 16, "warps_m": 2, "warps_n": 2, "stages": 3},
)
#: ``epilogue_prefetch`` distances (k-tiles before the mainloop's end) the sweep tries on the
#: schedule's tile: the carry epilogue's five array reads stalled the p = 511 carrier (ncu,
#: session 8: long-scoreboard 2.03 per issue against cuBLAS's 0.4); prefetched into L2 they load
#: during the last k-tiles' MMAs. 2 and 4 of Nq = 512's 32 k-tiles of 16.
PREFETCH_DISTANCES: tuple[int, ...] = (2, 4)
#: Split prefetch windows (``epilogue_prefetch_split``: one array every K / 5 k-tiles) the sweep tries:
#: half and all of Nq = 512's 32 k-tiles (session 9: all five at once, K = 2 and 4, ran 4.3-4.7 % slower).
PREFETCH_SPLIT_WINDOWS: tuple[int, ...] = (16, 64)
#: The carrier's own store groups the sweep tries on the schedule's tile (sites whose five array
#: loads are in flight together; the default 4 makes the p = 511 128x64 tile's epilogue wait for 8
#: DRAM round trips, 32 sites one; session 10: every L2 prefetch of the same loads ran slower).
STORE_GROUPS: tuple[int, ...] = (8, 16, 32)
#: Tiles per block of the asynchronous epilogue (``async_epilogue_tiles``: epilogue warps of their
#: own, fed through shared memory while the MMA warps go on) the sweep tries on the schedule's tile and
#: on the 64x64x16 library tile: the fill and drain of the hand-over cost one exposed epilogue per block.
ASYNC_EPILOGUE_TILES: tuple[int, ...] = (4, 8)
#: The two-block asynchronous carriers the sweep adds (session 12): one hand-over buffer and ptxas
#: told to fit two blocks per SM (``async_buffers = 1``, ``min_blocks = 2``), on the 64x64x16 4-stage
#: library tile (96 KB, 128 registers per thread), so that eight MMA warps share each SM as under
#: cuBLAS instead of the four of the one-block carriers (session 11: tensor pipe 50 %).
TWO_BLOCK_ASYNC: dict[str, int] = {"async_buffers": 1, "min_blocks": 2}
#: Plain carriers compiled for three blocks per SM (session 12): the 64x64x16 tile at 3 and 4 stages
#: (48 and 64 KB) capped at 168 registers (8 B/thread of spills, against 212 uncapped and two blocks),
#: so that while one block runs its epilogue's DRAM reads two keep eight MMA warps issuing.
THREE_BLOCK_TILES: tuple[dict[str, int], ...] = (
    {**LIBRARY_TILES[0], "min_blocks": 3},
    {**LIBRARY_TILES[0], "stages": 3, "min_blocks": 3},
)
#: First-wave stagger periods (``stagger_us``) the sweep tries on the schedule's tile: about half, one
#: and two block periods of the p = 511-767 carriers (p = 511: 28.8 us per tile per SM at two blocks
#: per SM, 58 us per block; 575 and 767 at three blocks per SM about 50-60 us), so that the blocks
#: that share an SM run out of phase and one's epilogue reads overlap another's MMAs.
STAGGER_PERIODS: tuple[int, ...] = (25, 50, 100)
#: Shapes the sweep tries besides the schedule's, where the arch has them (8x8x4 is every arch's, and
#: measured slower than 16x8x4 for the CuTe GEMMs at every order on the H200: 1.24-1.61 x GEMM).
SWEPT_SHAPES: tuple[str, ...] = ("16x8x4", "16x8x8")


def tile_neighbourhood(tile: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One pipeline stage fewer and more, bk halved and doubled."""
    out = []
    for key, value in (("stages", tile["stages"] - 1), ("stages", tile["stages"] + 1),
                       ("bk", tile["bk"] // 2), ("bk", tile["bk"] * 2)):
        if value >= 1:
            out.append({**tile, key: value})
    return out


def swept_shapes(arch: str, scheduled: str) -> list[str]:
    """The schedule's shape first, then the others of SWEPT_SHAPES the arch runs (sm_90+)."""
    shapes = [scheduled]
    if arch_number(arch) >= 90:
        shapes += [s for s in SWEPT_SHAPES if s != scheduled]
    return shapes


def tile_variants(shipped: Mapping[str, Any], arch: str, scheduled_mma: str,
                  k_extent: int | None = None, async_epilogue: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """(mma, tile) pairs beside (scheduled_mma, shipped): the neighbourhood with the schedule's
    shape, the library tiles with every swept shape and, with the schedule's shape, with the
    whole-mainloop split prefetch; ``swap`` kept from the shipped tile; no
    duplicates, none equal to the shipped pair. With ``k_extent`` (the GEMMs' contraction length,
    Nq) split-prefetch windows at or past the carrier's k-tiles are one schedule (the whole
    mainloop): only the first of them is tried. ``async_epilogue``: also the asynchronous-epilogue
    carriers (ASYNC_EPILOGUE_TILES; opt-in until they have run on a GPU: a barrier bug hangs)."""
    # library tiles name every switch, so none is inherited from GEMM_CUTE's tile for the role
    swap = {"swap": shipped.get("swap", False), "fragment_pipeline": False}
    pairs = [(scheduled_mma, t) for t in tile_neighbourhood(shipped)]
    plain = {k: v for k, v in shipped.items() if k not in ("epilogue_prefetch", "epilogue_prefetch_split")}
    pairs += [(scheduled_mma, {**plain, "epilogue_prefetch": d}) for d in (0, *PREFETCH_DISTANCES)]
    groups = STORE_GROUPS + ((DEFAULT_STORE_GROUP,) if shipped.get("store_group") else ())  # the way back
    pairs += [(scheduled_mma, {**plain, "store_group": g}) for g in groups]
    pairs += [(scheduled_mma, {**plain, "stagger_us": us}) for us in STAGGER_PERIODS]
    if async_epilogue:
        pairs += [(scheduled_mma, {**t, "async_epilogue_tiles": n}) for n in ASYNC_EPILOGUE_TILES
                  for t in (plain, {**LIBRARY_TILES[0], **swap})]
        pairs += [(scheduled_mma, {**LIBRARY_TILES[0], **swap, "async_epilogue_tiles": n, **TWO_BLOCK_ASYNC})
                  for n in ASYNC_EPILOGUE_TILES]
    pairs += [(scheduled_mma, {**t, **swap}) for t in THREE_BLOCK_TILES]
    # and their plain twins (the same tile without the register cap; the 4-stage one is a library tile): the
    # GPU test that min_blocks changes no bit compares each capped carrier of a build with its twin
    pairs += [(scheduled_mma, {**{k: v for k, v in t.items() if k != "min_blocks"}, **swap})
              for t in THREE_BLOCK_TILES]
    # the fragment pipeline on the schedule's tile and on each library tile, with the schedule's shape
    pairs += [(scheduled_mma, {**t, "fragment_pipeline": True})
              for t in (plain, *({**lt, **swap} for lt in LIBRARY_TILES))]
    def split_windows(bk: int) -> list[int]:
        """The split windows worth trying on a tile of ``bk``: those inside its mainloop and the
        first that covers all of it (without ``k_extent``: every window)."""
        windows = list(PREFETCH_SPLIT_WINDOWS)
        if k_extent is None:
            return windows
        k_tiles = -(-k_extent // int(bk))
        whole = [d for d in windows if d >= k_tiles]
        return [d for d in windows if d < k_tiles] + whole[:1]

    windows = split_windows(shipped["bk"])
    pairs += [(scheduled_mma, {**plain, "epilogue_prefetch": d, "epilogue_prefetch_split": True})
              for d in windows]
    pairs += [(mma, {**t, **swap}) for mma in swept_shapes(arch, scheduled_mma) for t in LIBRARY_TILES]
    # the schedule's own tile on the other shapes (session 16: cuBLAS's p = 767 DGEMMs issue 16x8x8; the
    # p = 767 carrier's three-block tile was only ever built with the 16x8x4 it was chosen on)
    pairs += [(mma, plain) for mma in swept_shapes(arch, scheduled_mma)[1:]]
    # The widest split window (the whole mainloop where it reaches it) on each library tile with the schedule's shape: the smaller
    # tiles hold two blocks per SM, so one block's epilogue can also run under the other's mainloop.
    pairs += [(scheduled_mma, {**t, **swap, "epilogue_prefetch": split_windows(t["bk"])[-1],
                               "epilogue_prefetch_split": True}) for t in LIBRARY_TILES]

    def key_of(mma: str, tile: Mapping[str, Any]) -> tuple:
        """No prefetch is prefetch 0, no store group the default one, no pipeline a false one."""
        return mma, tuple(sorted((k, v) for k, v in tile.items()
                                 if not (k in ("epilogue_prefetch", "epilogue_prefetch_split", "store_group",
                                               "fragment_pipeline", "async_epilogue_tiles", "min_blocks",
                                               "stagger_us") and not v)
                                 and not (k == "store_group" and v == DEFAULT_STORE_GROUP)
                                 and not (k == "async_buffers" and v == 2)))

    seen = {key_of(scheduled_mma, shipped)}
    out = []
    for mma, tile in pairs:
        key = key_of(mma, tile)
        if key not in seen:
            seen.add(key)
            out.append((mma, tile))
    return out


def prefetch_tag(tile: Mapping[str, Any]) -> str:
    """The epilogue-prefetch part of a tile's names: ``e16s`` (split), ``e2``, or "" (none)."""
    distance = tile.get("epilogue_prefetch")
    return f"e{distance}{'s' if tile.get('epilogue_prefetch_split') else ''}" if distance else ""


def tile_tag(tile: Mapping[str, Any]) -> str:
    """A kernel-name suffix naming a carrier tile: ``t64x64x16w2x2s4`` (``swap`` appends ``t``,
    a prefetch its tag, the carrier's own store group ``g8``)."""
    t = tile
    return (f"t{t['bm']}x{t['bn']}x{t['bk']}w{t['warps_m']}x{t['warps_n']}s{t['stages']}"
            + ("t" if t.get("swap") else "") + prefetch_tag(t)
            + (f"g{t['store_group']}" if t.get("store_group") else "")
            + ("fp" if t.get("fragment_pipeline") else "")
            + (f"ae{t['async_epilogue_tiles']}" if t.get("async_epilogue_tiles") else "")
            + (f"b{t['async_buffers']}" if t.get("async_buffers", 2) != 2 else "")
            + (f"mb{t['min_blocks']}" if t.get("min_blocks") else "")
            + (f"st{t['stagger_us']}" if t.get("stagger_us") else ""))


__all__ = ["STAGGER_PERIODS", "ASYNC_EPILOGUE_TILES", "THREE_BLOCK_TILES", "TWO_BLOCK_ASYNC", "LIBRARY_TILES", "PREFETCH_DISTANCES", "PREFETCH_SPLIT_WINDOWS", "prefetch_tag", "STORE_GROUPS", "SWEPT_SHAPES", "swept_shapes", "tile_neighbourhood", "tile_tag", "tile_variants"]
