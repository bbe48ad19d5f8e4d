"""``overlap_formed`` (GEMM_FUSED): under the overlapped volume flux, the first GEMM forms its own flux
operand once per staged element (``GemmConfig.product_staged``), so no product runs alone and the two
confined products start with it. Why: on the H100 timeline of session 26 the first product's phase
(1.25 ms of an 11.09-ms call at p = 511) had nothing beside it but the face flux.

CPU: the program and its launch plan (no ``volume_flux_<first>`` node, the first GEMM reads q and
its velocity, concurrent with the confined products under every hazard), the settings (that GEMM on
CuTe with the staged product, the kernel the all-staged build makes), the build plan and the
workspace of a schedule with the key, and the one-line errors. GPU (marked): validated against the
NumPy reference."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from composer.arch.machines import load_machines
from composer.errors import ComposerError
from composer.paths.registry import path_class
from composer.sched import hazard_violations, simulate

H200 = load_machines()["h200"]
P511 = (Path(__file__).resolve().parents[1] / "schedules" / "p0511.toml").read_text()
FORMED = {"overlap_formed": "true"}  # p0511.toml ships overlap_sms = 44 with the y carrier: z goes first


def test_the_first_product_node_is_gone_and_its_gemm_reads_q():
    cls = path_class("GEMM_FUSED")
    formed = cls.launch_plan(511, 1, H200, **cls.parse_options(FORMED))
    shipped = cls.launch_plan(511, 1, H200, **cls.parse_options({}))
    assert "volume_flux_z" in shipped.issue_order and "volume_flux_z" not in formed.issue_order
    gemm_z = formed.node("gemm_z")
    assert gemm_z.reads == ("D", "q", "w")
    assert formed.node("volume_flux_xy").sm_limit == 44
    # the first GEMM and the confined products: no path between them, different streams
    assert not formed.graph.has_edge("volume_flux_xy", "gemm_z") and not formed.graph.has_edge("gemm_z", "volume_flux_xy")
    assert formed.stream_of["gemm_z"] != formed.stream_of["volume_flux_xy"]
    assert cls.plan_settings(511, **cls.parse_options(FORMED)).endswith("overlap=44:z+formed")
    rng = random.Random(3)
    for _ in range(100):
        durations = {n: rng.uniform(0.01, 5.0) for n in formed.issue_order}
        assert hazard_violations(formed, simulate(formed, durations)) == []


def test_the_forming_gemm_runs_on_cute_with_the_staged_product():
    cls = path_class("GEMM_FUSED")
    plain, none = cls.resolved_settings(511, cls.parse_options({}))
    settings, formed = cls.resolved_settings(511, cls.parse_options(FORMED))
    assert none is None and formed == "z"
    assert plain.library["z"] == "cublas" and settings.library["z"] == "cute"  # cuBLAS cannot form a product
    assert {r: settings.library[r] for r in "xy"} == {r: plain.library[r] for r in "xy"}
    gemm = settings.gemms(("z",))["z"]
    assert gemm.forms_flux and gemm.config.product_staged and gemm.plain
    # the kernel is the one the all-forming build (flux = "staged") makes for z: builds of either cover it
    staged = dataclasses.replace(plain, flux="staged", library={r: "cute" for r in "xyz"})
    assert staged.gemms()["z"].config == gemm.config
    assert all(not g.forms_flux for r, g in settings.gemms(("z",)).items() if r != "z")
    with pytest.raises(ValueError, match="every GEMM already forms its flux"):
        staged.gemms(("z",))


def test_a_schedule_with_the_key_builds_the_forming_kernel_and_counts_two_flux_arrays(tmp_path, monkeypatch):
    from composer.build.plan import gemm_fused_jobs

    (tmp_path / "p0511.toml").write_text(P511.replace("overlap_sms = 44\n", "overlap_sms = 44\noverlap_formed = true\n"))
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(tmp_path))
    names = [job.name for job in gemm_fused_jobs(511, "sm_90")]
    assert "dgemm_p0511_z_m16_8_8_qs" in names and "dgemm_p0511_y_m16_8_8_carry" in names
    fluxes = path_class("GEMM_FUSED").workspace_items(511, (4, 4, 4))[0]
    assert fluxes.name == "volume fluxes" and fluxes.count == 2


@pytest.mark.parametrize("name,options,message", [
    ("GEMM", {"overlap_sms": 44, "overlap_formed": True}, "overlap_formed needs a GEMM that forms its flux operand"),
    ("GEMM_CUTE", {"overlap_sms": 44, "overlap_formed": True}, "GEMM_CUTE's GEMMs read the flux arrays"),
    ("GEMM_FUSED", {"overlap_sms": 0, "overlap_formed": True}, "overlap_formed needs overlap_sms"),
    ("GEMM_FUSED", {"overlap_formed": True, "flux": "staged"}, "overlap_formed needs flux = array"),
    ("GEMM_FUSED", {"overlap_formed": "perhaps"}, "overlap_formed='perhaps': expected true or false"),
])
def test_formed_options_that_cannot_run_are_one_line(name, options, message):
    cls = path_class(name)
    with pytest.raises(ComposerError, match=message) as err:
        cls.launch_plan(511, 1, H200, **cls.parse_options(options))
    assert "\n" not in str(err.value)


def test_the_schedule_key_is_checked_where_it_cannot_run(tmp_path):
    from composer.config.schedules import load_schedule_file
    from composer.errors import ConfigError

    path = tmp_path / "p0511.toml"
    path.write_text(P511.replace("[paths.GEMM_CUTE]\n", "[paths.GEMM_CUTE]\noverlap_sms = 44\noverlap_formed = true\n", 1))
    with pytest.raises(ConfigError, match="paths.GEMM_CUTE.overlap_formed: needs a GEMM that forms its flux operand"):
        load_schedule_file(path)
    path.write_text(P511.replace("overlap_sms = 44\n", "overlap_formed = true\n", 1))
    with pytest.raises(ConfigError, match="paths.GEMM_FUSED.overlap_formed: needs overlap_sms"):
        load_schedule_file(path)
