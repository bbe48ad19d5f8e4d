"""CPU tests of the volume flux overlapped with the first GEMM (``composer.paths.overlap``): the
volume_products kernels (source, compile, SASS), the scheduler pieces it rests on (resource hazards,
SM-confined nodes on priority streams, the contention estimate's partition), the option checks and
the plans of the three library paths. The end-to-end emulation of GEMM_FUSED with the overlap is in
tests/test_gemm_fused_emulated.py; the GPU checks in tests/test_flux_overlap_gpu.py."""

from __future__ import annotations

import random
import re
import subprocess
from types import SimpleNamespace

import pytest

from composer.arch.machines import load_machines
from composer.errors import ComposerError
from composer.kernels import support
from composer.paths.registry import path_class
from composer.runtime import LaunchError, entry_points
from composer.sched import (DataFlowError, KernelNode, build_graph, contended_timeline, hazard_violations, plan,
                            simulate)

from tests.test_support_kernels_cpu import _cuobjdump

H200 = load_machines()["h200"]


# --- the kernels ---------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ("sm_80", "sm_90", "sm_100"))
@pytest.mark.parametrize("products", ("x", "z", "xy", "yz", "xyz"))
def test_each_product_subset_compiles_to_its_entry(products, arch, tmp_path):
    built = support.compile_products(products, 512, arch, cache_dir=tmp_path)
    name = f"volume_products_{products}_nq512"
    assert entry_points(built.cubin) == [name] and built.log.strip() == ""


@pytest.mark.parametrize("products", ("z", "xy"))
def test_a_subset_touches_only_its_own_arrays(products):
    source = support.products_source(products, 64)
    body = source.split("{", 1)[1]
    for role, (vel, out) in support.PRODUCT_ARGS.items():
        used = re.search(rf"\b{out}\b\)?\[", body) is not None or re.search(rf"\({out}\)", body) is not None
        read = re.search(rf"\({vel}\)\[|\b{vel}\[", body) is not None
        assert used == read == (role in products), (role, products)


def test_the_products_are_volume_fluxs_own_multiplication():
    """The same DMUL per node as volume_flux (bit for bit: no FMA, no reassociation), in both forms."""
    source = support.products_source("xyz", 8)
    flux = support.source("volume_flux", 8)
    for line in ("make_double2(a.x * bx.x, a.y * bx.y)", "make_double2(a.x * bz.x, a.y * bz.y)"):
        assert source.count(line) == 2  # the confined form and the grid-stride form
    assert "make_double2(a.x * bu.x, a.y * bu.y)" in flux


def test_sass_reads_the_sm_id_and_resets_its_counters(tmp_path):
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not available")
    path = tmp_path / "p.cubin"
    path.write_bytes(support.compile_products("xy", 512, "sm_90", cache_dir=tmp_path).cubin)
    sass = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True, check=True).stdout
    assert "SR_SMID" in sass or "SR_VIRTUALSMID" in sass  # %smid (sm_90 reads the virtual SM id)
    assert sass.count("ATOMG") + sass.count("RED.") + sass.count("ATOM.") >= 3  # chunks, finished, leftover
    # the last block's reset: 64-bit zero stores to work[0] and work[1] (one base register, +0 and +8)
    resets = re.findall(r"STG\.E\.64 desc\[\w+\]\[(R\d+)\.64(\+0x8)?\], RZ", sass)
    bases = {base for base, offset in resets if not offset} & {base for base, offset in resets if offset}
    assert bases, f"no zero stores to the two counters: {resets}"
    assert "STL" not in sass and "LDL" not in sass
    assert "DFMA" not in sass and "DMUL" in sass


def test_source_and_name_validation():
    assert support.products_symbol("zx", 8) == "volume_products_xz_nq8"
    for bad in ("", "xx", "w", "xyzx"):
        with pytest.raises(ValueError, match="subset of 'xyz'"):
            support.product_roles(bad)
    with pytest.raises(ValueError, match="multiple of 32"):
        support.products_source("x", 8, block=100)


class FakeKernel:
    def __init__(self, name: str) -> None:
        self.name, self.block, self.device = name, (256, 1, 1), SimpleNamespace(sm_count=132)
        self.calls: list = []

    def launch(self, grid, block, args, smem, stream) -> None:
        self.calls.append((grid, block, args))


def test_launch_packs_the_unused_products_as_null_and_sizes_the_grid():
    kernel = FakeKernel("volume_products_xy_nq512")
    support.launch_volume_products(kernel, "xy", 0x1000, {"x": 0x2000, "y": 0x3000}, {"x": 0x5000, "y": 0x6000},
                                   1, sm_limit=44, work=0x9000)
    grid, block, args = kernel.calls[-1]
    assert (grid, block) == (132 * support.PRODUCT_BLOCKS_PER_SM, 256)
    assert args == (0x1000, 0x2000, 0x3000, 0, 0x5000, 0x6000, 0, 1, 44, 0x9000, 0)
    support.launch_volume_products(kernel, "xy", 0x1000, {"x": 0x2000, "y": 0x3000}, {"x": 0x5000, "y": 0x6000}, 1)
    assert kernel.calls[-1][0] == support.launch_shape("volume_flux", 512, 1, 256, 132)[0]
    assert len(support.PRODUCTS_SIGNATURE) == len(kernel.calls[-1][2])


@pytest.mark.parametrize("call,message", [
    (dict(products="xy", velocity={"x": 16, "y": 32}, out={"x": 48, "y": 64}, sm_limit=44), "counter buffer"),
    (dict(products="xy", velocity={"x": 16}, out={"x": 48, "y": 64}), "velocities and outputs for x, y"),
    (dict(products="xy", velocity={"x": 16, "y": 40}, out={"x": 48, "y": 64}), "16-byte aligned"),
    (dict(products="z", velocity={"z": 16}, out={"z": 48}), "expected a volume_products_z_nq"),
])
def test_launch_errors_are_one_line(call, message):
    kernel = FakeKernel("volume_products_xy_nq8")
    with pytest.raises(LaunchError, match=message) as err:
        support.launch_volume_products(kernel, call["products"], 0x100, call["velocity"], call["out"], 2,
                                       sm_limit=call.get("sm_limit", 0))
    assert "\n" not in str(err.value) and not kernel.calls


# --- the scheduler ---------------------------------------------------------------------------------

def overlap_program() -> list[KernelNode]:
    return [
        KernelNode("first", "volume_flux", ("q", "w"), ("flux_z",), cost=1.0, resource="dram"),
        KernelNode("rest", "volume_flux", ("q", "u", "v"), ("flux_x", "flux_y"), cost=2.0, resource="dram",
                   sm_limit=44),
        KernelNode("gemm_z", "gemm", ("D", "flux_z"), ("dz",), cost=3.0),
        KernelNode("gemm_x", "gemm", ("D", "flux_x"), ("dx",), cost=3.0),
        KernelNode("gemm_y", "gemm", ("D", "flux_y"), ("dy",), cost=3.0),
        KernelNode("lift", "lift", ("dx", "dy", "dz"), ("dqdt",), cost=1.0),
    ]


INPUTS = ("q", "u", "v", "w", "D")


def test_a_shared_resource_orders_kernels_that_share_no_array():
    graph = build_graph(overlap_program(), INPUTS)
    assert graph.edges["first", "rest"]["hazards"] == (("res", "dram"),)
    alone = build_graph([KernelNode(n.name, n.role, n.reads, n.writes) for n in overlap_program()], INPUTS)
    assert not alone.has_edge("first", "rest")


def test_a_confined_kernel_gets_its_own_priority_stream_never_the_main_one():
    launch = plan(build_graph(overlap_program(), INPUTS), 8)
    assert "rest" in launch.critical_path and launch.stream_of["rest"] != 0
    confined = launch.stream_of["rest"]
    assert launch.priority_streams == (confined,)
    assert all(s != confined for n, s in launch.stream_of.items() if n != "rest")
    assert launch.stream_of["first"] == 0 and launch.stream_of["gemm_x"] == 0


def test_the_serial_plan_runs_a_confined_kernel_alone_on_the_main_stream():
    """What composer.sched.measure times as its node time: the kernel alone on its partition."""
    serial = plan(build_graph(overlap_program(), INPUTS), 1)
    assert set(serial.stream_of.values()) == {0} and serial.priority_streams == ()
    with pytest.raises(DataFlowError, match="sm_limit must be a positive integer"):
        KernelNode("k", "x", sm_limit=0)


@pytest.mark.parametrize("max_streams", (2, 3, 4))
def test_a_confined_kernel_never_shares_a_side_stream(max_streams):
    """Two streams: the one side stream is kept for the confined kernel and every ordinary kernel off
    the critical path falls back to main; more: ordinary kernels take the other side streams."""
    extra = KernelNode("side", "face_flux", ("q",), ("fstar",), cost=0.5)
    program = [extra, *overlap_program()]
    program[-1] = KernelNode("lift", "lift", ("dx", "dy", "dz", "fstar"), ("dqdt",), cost=1.0)
    launch = plan(build_graph(program, INPUTS), max_streams)
    confined = launch.stream_of["rest"]
    assert confined != 0 and launch.priority_streams == (confined,)
    assert [n for n, s in launch.stream_of.items() if s == confined] == ["rest"]
    if max_streams == 2:
        assert launch.streams == 2 and launch.stream_of["side"] == 0
    else:
        assert launch.stream_of["side"] not in (0, confined)
    rng = random.Random(max_streams)
    for _ in range(100):
        durations = {n: rng.uniform(0.01, 5.0) for n in launch.issue_order}
        assert hazard_violations(launch, simulate(launch, durations)) == []


def test_the_last_side_stream_is_kept_for_a_confined_kernel_still_to_come():
    """Ordinary kernels ready before the confined one do not take the only side stream: it waits for
    the confined kernel (which would otherwise have no stream of its own)."""
    program = [KernelNode(f"k{i}", "x", ("q",), (f"o{i}",), cost=1.0) for i in range(3)]
    program.append(KernelNode("c", "volume_flux", ("o0",), ("oc",), cost=0.1, sm_limit=8))
    program.append(KernelNode("end", "x", ("o1", "o2", "oc"), ("r",), cost=1.0))
    launch = plan(build_graph(program, ("q",)), 2)  # the reservation keeps stream 1 for "c"
    assert [n for n, s in launch.stream_of.items() if s == launch.stream_of["c"]] == ["c"]


def test_the_gemm_overlap_plans_on_two_streams_without_mixing():
    cls = path_class("GEMM")
    options = cls.parse_options({"overlap_sms": 32, "max_streams": 2})
    launch = cls.launch_plan(511, 1, H200, **options)
    confined = launch.stream_of["volume_flux_xy"]
    assert confined == 1 and [n for n, s in launch.stream_of.items() if s == 1] == ["volume_flux_xy"]


@pytest.mark.parametrize("max_streams", (1, 2, 3, 8))
def test_the_overlap_plan_keeps_every_hazard_under_random_durations(max_streams):
    launch = plan(build_graph(overlap_program(), INPUTS), max_streams)
    rng = random.Random(max_streams)
    for _ in range(200):
        durations = {n: rng.uniform(0.01, 5.0) for n in launch.issue_order}
        assert hazard_violations(launch, simulate(launch, durations)) == []


def test_the_contention_estimate_reserves_the_confined_kernels_sms():
    """The confined kernel runs at its own (partition) speed; the GEMM beside it on the SMs it leaves."""
    nodes = [KernelNode("rest", "volume_flux", ("q",), ("f",), sm_limit=44, resource="dram"),
             KernelNode("gemm", "gemm", ("q",), ("g",), grid=10_000)]
    launch = plan(build_graph(nodes, ("q",)), 4)
    timeline = contended_timeline(launch, {"rest": 1.0, "gemm": 3.0}, 132)
    assert timeline.end["rest"] == pytest.approx(1.0)
    # the GEMM did 88/132 of a second's work beside it, then the rest on the whole machine
    assert timeline.end["gemm"] == pytest.approx(1.0 + (3.0 - 88 / 132))


# --- the options and the paths' plans ---------------------------------------------------------------

@pytest.mark.parametrize("name", ("GEMM", "GEMM_CUTE"))
def test_library_paths_run_the_z_product_first_and_the_others_beside_gemm_z(name):
    cls = path_class(name)
    launch = cls.launch_plan(511, 1, H200, **cls.parse_options({"overlap_sms": 44}))
    assert "volume_flux" not in launch.issue_order
    graph = launch.graph
    assert set(graph.successors("volume_flux_z")) == {"gemm_z", "volume_flux_xy"}
    assert launch.node("volume_flux_xy").sm_limit == 44 and launch.stream_of["volume_flux_xy"] in launch.priority_streams
    assert cls.plan_settings(511, **cls.parse_options({"overlap_sms": 44})).endswith("overlap=44:z")
    first_x = cls.launch_plan(511, 1, H200, **cls.parse_options({"overlap_sms": 52, "overlap_first": "x"}))
    assert {"volume_flux_x", "volume_flux_yz"} <= set(first_x.issue_order)


def test_gemm_fused_overlap_follows_its_data_flow():
    cls = path_class("GEMM_FUSED")
    folded = cls.launch_plan(511, 1, H200, **cls.parse_options({"overlap_sms": 44, "carrier": "z", "fold": True}))
    assert {"volume_flux_x", "volume_flux_yz"} <= set(folded.issue_order)
    carried = cls.launch_plan(511, 1, H200, **cls.parse_options({"overlap_sms": 44, "carrier": "z"}))
    assert {"volume_flux_x", "volume_flux_yz"} <= set(carried.issue_order)  # z carries: x is preferred next
    shipped = cls.launch_plan(511, 1, H200, **cls.parse_options({"overlap_sms": 44}))
    assert {"volume_flux_z", "volume_flux_xy"} <= set(shipped.issue_order)  # the y carrier (p0511.toml)


@pytest.mark.parametrize("name", ("GEMM", "GEMM_FUSED"))
def test_overlap_face_moves_the_face_flux_behind_the_confined_products(name):
    """With ``overlap_face`` the face flux shares the flux kernels' resource and follows the confined
    products (beside a GEMM), so the first product has DRAM to itself; without it the face flux has
    no predecessor and runs beside the first product. Every hazard holds under random durations."""
    cls = path_class(name)
    plain = cls.launch_plan(511, 1, H200, **cls.parse_options({"overlap_sms": 44}))
    assert list(plain.graph.predecessors("surface_flux")) == []
    moved_options = cls.parse_options({"overlap_sms": 44, "overlap_face": "true"})
    moved = cls.launch_plan(511, 1, H200, **moved_options)
    assert list(moved.graph.predecessors("surface_flux")) == ["volume_flux_xy"]
    assert moved.node("surface_flux").sm_limit is None  # machine-filling: it takes the SMs the GEMMs leave
    assert set(moved.issue_order) == set(plain.issue_order)
    assert cls.plan_settings(511, **moved_options).endswith("overlap=44:z+face")
    rng = random.Random(7)
    for _ in range(100):
        durations = {n: rng.uniform(0.01, 5.0) for n in moved.issue_order}
        assert hazard_violations(moved, simulate(moved, durations)) == []


@pytest.mark.parametrize("name,options,message", [
    ("GEMM", {"overlap_first": "x"}, "overlap_first needs overlap_sms"),
    ("GEMM", {"overlap_face": True}, "overlap_face needs overlap_sms"),
    ("GEMM_FUSED", {"overlap_sms": 0, "overlap_face": True}, "overlap_face needs overlap_sms"),
    ("GEMM", {"overlap_sms": 132}, "must leave SMs to the GEMM; the device has 132"),
    ("GEMM_FUSED", {"overlap_sms": 44, "overlap_first": "y"}, "overlap_first=y: its GEMM cannot run first here"),
    ("GEMM_FUSED", {"overlap_sms": 44, "carrier": "z", "fold": True, "overlap_first": "y"}, "may be x"),
    ("GEMM_FUSED", {"overlap_sms": 44, "flux": "mainloop"}, "overlap_sms needs flux = array"),
    ("GEMM_FUSED", {"overlap_face": True, "flux": "mainloop"}, "overlap_face needs flux = array"),
])
def test_overlap_options_that_cannot_run_are_one_line(name, options, message):
    cls = path_class(name)
    with pytest.raises(ComposerError, match=message) as err:
        cls.launch_plan(511, 1, H200, **cls.parse_options(options))
    assert "\n" not in str(err.value)


def test_the_partition_bound_counts_the_ids_the_probe_saw():
    from composer.paths.overlap import partition_threshold

    assert partition_threshold(list(range(132)), 44) == 44
    assert partition_threshold([0, 1, 2, 3, 8, 9, 10, 11, 16], 6) == 10  # gaps in the numbering
    assert partition_threshold([5, 5, 1, 3], 2) == 4
    with pytest.raises(ComposerError, match="the probe saw 4 SMs"):
        partition_threshold([0, 1, 2, 3], 4)


def test_a_negative_partition_is_refused_at_parse_time():
    with pytest.raises(ComposerError, match="overlap_sms=-2"):
        path_class("GEMM").parse_options({"overlap_sms": -2})
    with pytest.raises(ComposerError, match="overlap_face='maybe': expected true or false"):
        path_class("GEMM").parse_options({"overlap_face": "maybe"})


# --- the prospective estimate --------------------------------------------------------------------

def test_bandwidth_is_interpolated_on_the_copy_curve():
    from composer.paths.overlap import bandwidth_at

    curve = {132: 3.84e12, 52: 3.73e12, 34: 3.14e12, 16: 1.55e12}
    assert bandwidth_at(curve, 34) == 3.14e12 and bandwidth_at(curve, 200) == 3.84e12
    assert bandwidth_at(curve, 43) == pytest.approx((3.14e12 + 3.73e12) / 2)
    assert bandwidth_at(curve, 8) == pytest.approx(1.55e12 / 2)
    with pytest.raises(ComposerError, match="no points"):
        bandwidth_at({}, 8)


def test_the_confined_products_take_what_dram_leaves_beside_the_gemm():
    from composer.paths.overlap import confined_seconds

    curve = {132: 3.84e12, 16: 1.55e12}
    # the partition's own rate binds: 1.55 TB/s on 16 SMs, the GEMM beside leaves 4.0 - 1.0 * 116/132
    assert confined_seconds(1.55e12, 16, 132, curve, 4.0e12, 1.0e12) == pytest.approx(1.0)
    # what DRAM leaves binds: 4.0 - 2.64 * 66/132 = 2.68 TB/s < the curve's 3.2 at 66 SMs
    assert confined_seconds(2.68e12, 66, 132, {132: 3.84e12, 66: 3.2e12}, 4.0e12, 2.64e12) == pytest.approx(1.0)
    with pytest.raises(ComposerError, match="no DRAM bandwidth left"):
        confined_seconds(1.0, 66, 132, curve, 1.0e12, 4.0e12)


def test_the_prediction_tool_splits_the_profiled_flux_and_prices_the_partition(tmp_path):
    import json

    from tools.overlap_predict import main

    out = tmp_path / "p.json"
    assert main(["--path", "GEMM_FUSED", "--order", "511", "--profile",
                 "docs/data/h200_s10/call1/prof/gf511win/profile.json", "--curve",
                 "docs/data/h200_s8/call4/bw/bandwidth_sms.json", "--sms", "32,56", "--gemm", "gemm_x=tilesize64x128",
                 "--gemm", "gemm_z=tilesize128x64", "--gemm", "gemm_y=carry", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    rows = {r["sms"]: r for r in doc["predictions"]}
    assert rows[32]["first_us"] == pytest.approx(3 / 7 * doc["node_us"]["volume_flux"])
    assert rows[32]["beside"] == "gemm_z" and rows[32]["confined"] == "volume_flux_xy"
    # the confined products are slower on fewer SMs; the GEMM beside them keeps more
    assert rows[32]["confined_us"] > rows[56]["confined_us"]
    assert main(["--path", "GEMM_FUSED", "--order", "511", "--profile",
                 "docs/data/h200_s10/call1/prof/gf511win/profile.json", "--curve",
                 "docs/data/h200_s8/call4/bw/bandwidth_sms.json", "--sms", "32"]) == 2  # a GEMM kernel unnamed
