"""The L2-partition probe (composer/runtime/l2_sides.py): its analysis on latency matrices built the way a
two-partition L2 would produce them, its kernels compiled for sm_90, and on a GPU the probe itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from composer.runtime import l2_sides as l2

ROOT = Path(__file__).resolve().parents[1]


def two_sided(n_sm: int = 132, n_lines: int = 256, near: float = 260.0, far: float = 420.0, noise: float = 6.0,
              run: int = 4, seed: int = 0) -> tuple[np.ndarray, list[int], np.ndarray, np.ndarray]:
    """Latencies [SM, line] of an L2 of two partitions: SMs on alternating TPC pairs (as %smid numbers
    them, not in halves), lines homed in runs of ``run`` lines alternating sides."""
    rng = np.random.default_rng(seed)
    smids = list(rng.permutation(144)[:n_sm])  # ids with gaps (disabled SMs)
    side = np.array([(s // 2) % 2 for s in smids])
    home = np.array([(line // run) % 2 for line in range(n_lines)])
    lat = np.where(side[:, None] == home[None, :], near, far) + rng.normal(0.0, noise, (n_sm, n_lines))
    return lat, smids, side, home


def test_split_two_finds_the_gap_and_rates_it():
    g = l2.split_two(np.array([100, 101, 99, 100, 300, 301, 299]))
    assert (g.low_count, g.high_count) == (4, 3)
    assert 101 < g.threshold < 299
    assert g.separation > 50
    flat = l2.split_two(np.random.default_rng(1).normal(300, 5, 132))
    assert not l2.is_two_level(flat, 132)
    with pytest.raises(ValueError):
        l2.split_two(np.array([1.0]))


def test_a_lone_slow_sm_is_not_a_partition():
    col = np.full(132, 250.0)
    col[17] = 900.0
    assert not l2.is_two_level(l2.split_two(col), 132)


def test_sides_and_homes_recovered_from_a_two_partition_matrix():
    lat, smids, side, home = two_sided()
    m = l2.sides_from_latency(lat, smids)
    assert m.partitioned and m.two_level_lines == lat.shape[1]
    got = np.array(m.side)
    # side 0 is the side of the smallest SM id; the truth up to that swap
    truth = side if side[int(np.argmin(smids))] == 0 else 1 - side
    assert np.array_equal(got, truth)
    want_home = home if side[int(np.argmin(smids))] == 0 else 1 - home
    assert m.home == [int(h) for h in want_home]
    assert m.agreement == pytest.approx(1.0)
    assert m.near_cycles == pytest.approx(260, abs=3) and m.far_cycles == pytest.approx(420, abs=3)
    assert sorted(m.members(0) + m.members(1)) == sorted(smids)
    d = m.as_dict()
    assert d["partitioned"] and d["homes"]["0"] + d["homes"]["1"] == lat.shape[1]


def test_one_level_l2_gives_one_side():
    rng = np.random.default_rng(2)
    lat = rng.normal(300, 5, (132, 64))
    m = l2.sides_from_latency(lat, list(range(132)))
    assert not m.partitioned and set(m.side) == {0} and m.home == [None] * 64


def test_vote_survives_noisy_lines_and_misfit_sms():
    lat, smids, side, _ = two_sided(noise=25.0, seed=3)
    lat[5, :40] = lat[5, :40][::-1]  # one SM's first lines scrambled
    m = l2.sides_from_latency(lat, smids)
    truth = side if side[int(np.argmin(smids))] == 0 else 1 - side
    assert np.mean(np.array(m.side) == truth) >= 131 / 132
    assert m.agreement > 0.95


def test_row_count_must_match_the_ids():
    with pytest.raises(ValueError, match="rows"):
        l2.sides_from_latency(np.zeros((3, 4)), [0, 1])


def test_home_runs_and_element_split():
    home = [0, 0, 1, 1, 1, None, 0, 1]
    r = l2.home_runs(home, 128)
    assert r == {"runs": 4, "min_bytes": 128, "median_bytes": 192.0, "max_bytes": 384}  # runs of 2, 3, 1, 1 lines
    assert l2.home_runs([None, None], 128)["runs"] == 0
    # homes in runs of 4 lines (512 B): every 4-KiB element half on each side
    interleaved = [(i // 4) % 2 for i in range(256)]
    assert l2.element_home_split(interleaved, 128, 4096) == pytest.approx(0.5)
    # homes in runs of 32 lines (4 KiB) aligned to elements: none split
    blocks = [(i // 32) % 2 for i in range(256)]
    assert l2.element_home_split(blocks, 128, 4096) == 0.0


def test_read_bytes_counts_each_mode():
    # 60 SMs on side 0, 70 on side 1, 2 unprobed (they read every line)
    sms, lines = (60, 70, 2), (1000, 1200)
    own = l2.read_bytes("own", lines, sms, 8)
    other = l2.read_bytes("other", lines, sms, 8)
    every = l2.read_bytes("all", lines, sms, 8)
    assert own == (60 * 1000 + 70 * 1200 + 2 * 2200) * 8 * 128
    assert other == (60 * 1200 + 70 * 1000 + 2 * 2200) * 8 * 128
    assert every == 132 * 2200 * 8 * 128


def test_offsets_and_launch_sizes():
    assert list(l2.fine_offsets(3)) == [0, 16, 32]
    assert list(l2.coarse_offsets(3, 8192, 1024)) == [128, 1152, 2176]
    smem = l2.one_block_per_sm_smem(227 * 1024)
    assert 2 * smem > 228 * 1024 and smem <= 227 * 1024  # one block per SM, and it fits
    assert l2.ticket_spin_limit(132, 1024, 8) > 132 * 1024 * 9 * 1000


def test_kernels_compile_for_sm_90_with_l2_only_chained_loads():
    from composer.arch import sass
    from composer.runtime.nvrtc import compile_cuda

    compiled = compile_cuda(l2._LATENCY_SOURCE, "l2_sides.cu", arch="sm_90",
                            entry_points=[l2.LATENCY_ENTRY, l2.READ_ENTRY])
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "l2.cubin"
        path.write_bytes(compiled.cubin)
        text = sass.disassemble(path)
    body = text.split("Function : l2_latency", 1)[1]
    # the timed loads are there (ptxas keeps them: their values reach the shared-memory store) and
    # bypass L1; the clock is read after the store that waits for the last one
    assert body.count("LDG.E.64.STRONG.GPU") >= 8
    lines = [ln for ln in body.splitlines() if "STS.64" in ln or "SR_CLOCKLO" in ln]
    kinds = ["STS" if "STS" in ln else "CLK" for ln in lines]
    assert "STS,CLK" in ",".join(kinds)
    read = text.split("Function : l2_read", 1)[1].split("Function :", 1)[0]
    assert "LDG.E.128.STRONG.GPU" in read


def test_tool_without_a_gpu_says_so_in_one_line():
    from composer.runtime import gpu_available

    if gpu_available():
        pytest.skip("a GPU is present")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "l2_sides.py")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error:")
    assert "Traceback" not in proc.stderr


@pytest.mark.gpu
def test_probe_on_the_gpu(tmp_path):
    """The whole tool on small sizes: every SM probes, the sides cover them, each line has a latency
    in an L2 hit's range, and if the L2 shows two partitions the read bandwidths come back."""
    out = tmp_path / "l2.json"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "l2_sides.py"), "--probe-lines", "64",
                           "--read-mib", "1", "--problem-elements", "64", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["probing_sms"] == report["sm_count"]
    sides = report["sides"]["sides"]
    assert len(sides["0"]) + len(sides["1"]) == report["sm_count"]
    raw = report["reference_raw"]  # every block's first loads: its own part, block 0 the whole pool
    assert [len(f) for f in raw["first"]] == [raw["per_block"] * report["sm_count"]] + [raw["per_block"]] * (
        report["sm_count"] - 1)
    if report["sides"]["partitioned"]:
        near, far = report["sides"]["near_cycles"], report["sides"]["far_cycles"]
        assert 50 < near < far < 5000
        if "read_bandwidth" in report:
            assert all(v["median_Bps"] > 1e11 for v in report["read_bandwidth"].values())
    if report.get("split_source", "none") != "none" and "reference_sms" in report:  # p = 7's arrays, 64 elements each
        homes = report["problem_homes"]
        assert homes["elements"] == 64 and set(homes["arrays"]) == {"q", "u", "v", "w", "Ex", "Ey", "Ez", "dqdt"}
        assert homes["elements_all_known"] > 0


def test_link_table_reads_saved_ncu_exports():
    """tools/l2_link.py on a saved `composer profile` CSV (FUSED_TC p = 7, session 36): the link's sectors
    split into hits and misses at the far slice, as ncu reported them."""
    sys.path.insert(0, str(ROOT / "tools"))
    import l2_link

    (row,) = l2_link.link_rows(ROOT / "docs/data/h200_s36/call1/prof/applied/FUSED_TC-p7.csv")
    assert row["kernel"] == "fused_tc_p7_k0_xyz"
    assert row["link_M"] == pytest.approx(row["far_hits_M"] + row["far_misses_M"], rel=1e-2)  # 0.2 % other lookups
    assert 0.3 < row["link_share"] < 0.5 and row["link_busy_pct"] > 90
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "l2_link.py"), str(ROOT / "README.md")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith("error:") and proc.stderr.count("\n") == 1


def simulated_reference_probe(copies: bool, n_sm: int = 132, per_block: int = 64, seed: int = 4,
                              dram_first: bool = True, near_far: tuple[float, float] = (260.0, 420.0),
                              miss_runs: float = 0.0):
    """First-load cycles of the reference design on a two-partition L2, simulated: block 0 reads the whole
    pool (from DRAM when ``dram_first``: the far side's DRAM lines cross the link), then each block its part;
    a line is near to a side that is its home or (``copies``) that read it before. ``miss_runs``: the share of
    the pool's 4-KiB runs (32 lines) that miss for the reference (about 460 cycles), as an H100 showed."""
    rng = np.random.default_rng(seed)
    smids = list(rng.permutation(144)[:n_sm])
    side = np.array([(s // 2) % 2 for s in smids])
    pool, parts = l2.reference_pool(n_sm, per_block)
    home = rng.integers(0, 2, pool.size)
    seen = {0: np.zeros(pool.size, bool), 1: np.zeros(pool.size, bool)}
    first = []
    for b in range(n_sm):
        idx = parts[b]
        near = (home[idx] == side[b]) | (seen[side[b]][idx] if copies else False)
        lat = np.where(near, *near_far) + rng.normal(0, 8, idx.size)
        if b == 0 and dram_first:
            lat = lat + 500 + rng.normal(0, 30, idx.size)
        if b == 0 and miss_runs:
            missed = np.repeat(rng.random(idx.size // 32 + 1) < miss_runs, 32)[:idx.size]
            lat = np.where(missed, 460.0 + rng.normal(0, 20, idx.size), lat)
        seen[side[b]][idx] = True
        first.append(lat)
    return smids, side, first, parts


@pytest.mark.parametrize("copies", [True, False])
def test_reference_design_recovers_the_sides_with_and_without_copies(copies: bool):
    smids, side, first, parts = simulated_reference_probe(copies)
    got = l2.sides_from_reference(first[0], first, parts, smids)
    truth = side if side[0] == 0 else 1 - side  # side 0 is the reference's
    assert got.partitioned and np.array_equal(np.array(got.side), truth)
    assert got.near_cycles == pytest.approx(260, abs=10) and got.far_cycles == pytest.approx(420, abs=10)
    # the reference's side finds the lines it read on the other side's home near only when copies are kept
    assert got.copy_fraction == pytest.approx(1.0 if copies else 0.0, abs=0.05)
    assert got.members(0)[0] == min(got.members(0))


@pytest.mark.parametrize("copies", [True, False])
def test_reference_design_sets_the_references_misses_aside(copies: bool):
    """The H100's levels (near 267, far 308 cycles, a quarter of the reference's lines missing at about 460 in
    4-KiB runs): the first split of the reference's loads is hits against misses; the sides come from the
    hits' own two levels (``reference_levels``)."""
    smids, side, first, parts = simulated_reference_probe(copies, dram_first=False, near_far=(267.0, 308.0),
                                                          miss_runs=0.26)
    near, far, groups = l2.reference_levels(first[0])
    assert groups.low_mean == pytest.approx(267, abs=5) and groups.high_mean == pytest.approx(308, abs=5)
    assert 0.6 < (near | far).mean() < 0.85  # the misses in neither
    got = l2.sides_from_reference(first[0], first, parts, smids)
    truth = side if side[0] == 0 else 1 - side
    measured = [i for i, s in enumerate(smids) if s not in got.unmeasured]
    assert got.partitioned and np.array_equal(np.array(got.side)[measured], truth[measured])
    assert len(got.unmeasured) < 0.15 * len(smids)  # blocks whose whole part the reference missed


def test_reference_design_on_the_saved_h100_probe_agrees_with_the_matrix_form():
    """Session 40's H100 probe (docs/data/h100_s40/call2/l2/sides.json, with the raw first loads): the run's
    own analysis, before ``reference_levels``, split the SMs 99 / 33 on the reference's hit/miss levels;
    re-analysed, the reference design puts every SM on the side the matrix form gave it (agreement 1.0)."""
    report = json.loads((ROOT / "docs/data/h100_s40/call2/l2/sides.json").read_text())
    raw = report["reference_raw"]
    first = [np.asarray(f, dtype=float) for f in raw["first"]]
    _, parts = l2.reference_pool(len(raw["smids"]), raw["per_block"])
    got = l2.sides_from_reference(first[0], first, parts, raw["smids"])
    assert got.partitioned and report["sides"]["sides"]["1"] != []  # the saved, wrong split had two sides too
    matrix = report["common_lines"]["repeat"]["sides"]
    side_of = {s: 0 for s in matrix["0"]} | {s: 1 for s in matrix["1"]}
    ref_side = side_of[raw["smids"][0]]
    assert all((d == 0) == (side_of[s] == ref_side) for s, d in zip(got.smids, got.side)) and not got.unmeasured
    assert 20 < got.far_cycles - got.near_cycles < 60
    assert sorted(len(report["sides"]["sides"][k]) for k in "01") == [33, 99]


def test_one_set_of_lines_for_every_sm_hides_the_sides_when_copies_are_kept():
    """Why the reference design: with copies, every SM in turn reading the same lines finds almost all near
    (the first SM of its side to read a far line left a copy), so the matrix form sees one level."""
    rng = np.random.default_rng(6)
    n_sm, n_lines = 132, 128
    side = rng.integers(0, 2, n_sm)
    home = rng.integers(0, 2, n_lines)
    seen = np.zeros((2, n_lines), bool)
    rows = []
    for b in range(n_sm):
        near = (home == side[b]) | seen[side[b]]
        rows.append(np.where(near, 260.0, 420.0) + rng.normal(0, 8, n_lines))
        seen[side[b]] = True
    assert not l2.sides_from_latency(np.vstack(rows), list(range(n_sm))).partitioned


def test_no_partition_gives_one_side():
    rng = np.random.default_rng(7)
    pool, parts = l2.reference_pool(132, 64)
    first = [rng.normal(300, 8, p.size) for p in parts]
    got = l2.sides_from_reference(first[0], first, parts, list(range(132)))
    assert not got.partitioned and set(got.side) == {0}


def test_homes_from_the_later_of_two_sms():
    lat = np.array([262.0, 418, 259, 421, 265])
    assert l2.homes_from_later(lat, 1) == [1, 0, 1, 0, 1]
    assert l2.homes_from_later(np.full(5, 300.0) + np.arange(5), 1) == [None] * 5


def test_a_near_level_of_two_slice_distances_is_not_taken_for_near_and_far():
    """No misses, near lines at two slice distances 12 cycles apart, far lines 150 above: the three-level
    reading must not fire (it would drop the far lines as misses and split the near ones)."""
    rng = np.random.default_rng(21)
    home = rng.integers(0, 2, 2000)
    slice_ = rng.integers(0, 2, 2000)
    lat = np.where(home == 0, 258.0, 420.0) + 12.0 * slice_ + rng.normal(0, 2, 2000)
    near, far, _ = l2.reference_levels(lat)
    assert np.array_equal(near, home == 0) and np.array_equal(far, home == 1)
    got = l2.homes_from_later(lat, 0)
    assert got == [0 if h == 0 else 1 for h in home]
    empty_near, empty_far, groups = l2.reference_levels(np.array([-1.0, -1.0, 300.0]))
    assert not empty_near.any() and not empty_far.any() and not l2.is_two_level(groups, 1)


def test_one_two_level_line_is_no_matrix_split():
    rng = np.random.default_rng(22)
    side = rng.integers(0, 2, 132)
    rows = 280 + rng.normal(0, 3, (132, 128))
    rows[:, 0] += np.where(side == 1, 40.0, 0.0)  # one line tells the sides apart, the rest are one level
    sides = l2.sides_from_latency(rows, list(range(132)))
    assert sides.partitioned and sides.two_level_lines == 1 and not l2.credible_matrix_split(sides)
    rows[:, :8] += np.where(side == 1, 40.0, 0.0)[:, None]
    assert l2.credible_matrix_split(l2.sides_from_latency(rows, list(range(132))))


def test_homes_from_the_later_sm_leave_its_misses_unknown():
    rng = np.random.default_rng(11)
    home = rng.integers(0, 2, 512)
    lat = np.where(home == 1, 267.0, 308.0) + rng.normal(0, 5, home.size)  # the later SM is on side 1
    missed = rng.random(home.size) < 0.2
    lat[missed] = 460 + rng.normal(0, 15, missed.sum())
    got = l2.homes_from_later(lat, 1)
    assert all(g is None for g, m in zip(got, missed) if m)
    assert all(g == h for g, h, m in zip(got, home, missed) if not m)


def _element_homes(kind: str, n_arrays: int = 8, n_elem: int = 400, per: int = 32, seed: int = 12) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "shared":  # every array of an element on the element's side
        side = rng.integers(0, 2, n_elem)
        return np.broadcast_to(side[None, :, None], (n_arrays, n_elem, per)).copy()
    if kind == "independent":  # each array's part of an element on one side, drawn per array
        return np.broadcast_to(rng.integers(0, 2, (n_arrays, n_elem))[:, :, None], (n_arrays, n_elem, per)).copy()
    return rng.integers(0, 2, (n_arrays, n_elem, per))  # "lines": homes interleaved line by line


def test_element_array_homes_tells_shared_independent_and_interleaved_homes_apart():
    names = ["q", "u", "v", "w", "Ex", "Ey", "Ez", "dqdt"]
    shared = l2.element_array_homes(_element_homes("shared"), names)
    assert shared["all_agree"] == 1.0 and shared["all_agree_if_independent"] < 0.05
    assert all(a["pure"] == 1.0 and a["minority_share"] == 0.0 for a in shared["arrays"].values())
    independent = l2.element_array_homes(_element_homes("independent", n_arrays=3, n_elem=4000)[:, :, :], names[:3])
    # three arrays: a quarter of the elements agree by chance (0.5^3 + 0.5^3)
    assert independent["all_agree_if_independent"] == pytest.approx(0.25, abs=0.03)
    assert independent["all_agree"] == pytest.approx(independent["all_agree_if_independent"], abs=0.03)
    assert all(0.45 < v < 0.55 for v in independent["pairs"].values())
    skewed = _element_homes("independent", n_arrays=2, n_elem=4000)
    skewed[0, :3000] = 1  # q 7/8 on side 1, u half and half: 7/8 * 1/2 + 1/8 * 1/2 = 0.5 agree by chance
    got = l2.element_array_homes(skewed, names[:2])
    assert got["arrays"]["q"]["side1_share"] == pytest.approx(0.875, abs=0.02)
    assert got["all_agree_if_independent"] == pytest.approx(0.5, abs=0.02)
    lines = l2.element_array_homes(_element_homes("lines"), names)
    assert all(a["pure"] == 0.0 and a["minority_share"] > 0.35 for a in lines["arrays"].values())
    unknown = _element_homes("shared")
    unknown[0, :10] = -1  # q's lines of ten elements unmeasured: those elements leave the cross-array figures
    partial = l2.element_array_homes(unknown, names)
    assert partial["elements_all_known"] == 390 and partial["arrays"]["q"]["elements"] == 390
