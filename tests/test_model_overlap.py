"""The overlap exponent: demands combined by a k-norm, and k chosen from a pair of calibrated shapes.

A synthetic FUSED_TC kernel binds the FP64 budget at twice its DRAM demand; its FUSED_TC16 twin
(DMMA.16x8x4: half the instructions at the same c_tc) has both demands equal. The transfer's
prediction is elapsed x ||D_target||_k / ||D_source||_k, computed here by hand."""

from __future__ import annotations

import json
import math

import pytest

from composer.arch.machines import get_machine
from composer.cli.main import main
from composer.model.calibrate import Model
from composer.model.capacity import capacities
from composer.model.demand import combined
from tests.model_fixtures import MACHINES_FILE, kernel_row, write_build, write_profile

SOURCE_CYCLES = 3.0e6  # elapsed of the 8x8x4 kernel: eta 1.5 against its FP64 budget of 2e6 cycles
TARGET_CYCLES = 1.8e6  # what the 16x8x4 kernel "measured"


@pytest.fixture(autouse=True)
def _worktree_machines(monkeypatch):
    monkeypatch.setenv("COMPOSER_MACHINES", str(MACHINES_FILE))


def _row(name: str, dmma: float, cycles: float) -> dict[str, str]:
    dram_per_sm_cycle = capacities(get_machine("h200", MACHINES_FILE)).per_sm_cycle["dram"]
    return kernel_row(name=name, dmma=dmma, fp64=0.0, issue=1e3, alu=1e3, fma=1e3, lsu=1e3, l2=1e3,
                      dram=1e6 * dram_per_sm_cycle * 132, cycles=cycles)  # DRAM demand 1e6 cycles


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("overlap")
    n_8x8x4 = 2e6 * 132 / 4  # FP64 budget 2e6 SM cycles at c_tc = 4
    write_profile(root / "prof", "FUSED_TC", 63, [_row("fused_tc_p63_s0_x", n_8x8x4, SOURCE_CYCLES)])
    write_profile(root / "prof", "FUSED_TC16", 63, [_row("fused_tc16_p63_s0_x", n_8x8x4 / 2, TARGET_CYCLES)])
    write_build(root / "build", "sm_90", {"fused_tc_p63_s0_x": "8x8x4", "fused_tc16_p63_s0_x": "16x8x4"},
                root / "nvrtc")
    return root


def _by_hand(k: float | None) -> float:
    """The transferred kernel's cycles: source (2e6, 1e6) -> target (1e6, 1e6)."""
    if k is None:
        return SOURCE_CYCLES * 1e6 / 2e6
    return SOURCE_CYCLES * (2 * 1e6 ** k) ** (1 / k) / ((2e6) ** k + (1e6) ** k) ** (1 / k)


def test_combined_is_the_max_the_sum_or_between():
    cycles = {"fp64": 3.0, "dram": 4.0, "issue": 0.0}
    assert combined(cycles) == 4.0
    assert combined(cycles, 1.0) == pytest.approx(7.0)
    assert combined(cycles, 2.0) == pytest.approx(5.0)
    assert 4.0 < combined(cycles, 64.0) < 4.0 * 1.02
    assert combined({"fp64": 1e300, "dram": 1e300}, 64.0) == pytest.approx(1e300 * 2 ** (1 / 64))
    with pytest.raises(ValueError, match="k >= 1"):
        combined(cycles, 0.5)


@pytest.mark.parametrize("k", [None, 2.0, 4.0])
def test_the_calibration_is_reproduced_and_the_transfer_follows_the_norm(saved, tmp_path, capsys, k):
    model = tmp_path / "m.json"
    extra = [] if k is None else ["--overlap", str(k)]
    assert main(["model", "fit", "--profiles", str(saved / "prof"), "--build", str(saved / "build"), "--out", str(model), *extra, "--json"]) == 0
    capsys.readouterr()
    body = json.loads(model.read_text())
    assert ("overlap" in body) == (k is not None) and Model.load(model).overlap == k
    assert main(["model", "predict", "--model", str(model), "--machine", "h200", "--build", str(saved / "build"),
                 "--as", "FUSED_TC16=FUSED_TC", "--paths", "FUSED_TC,FUSED_TC16", "--out", str(tmp_path / "p.json"),
                 "--json"]) == 0
    seconds = {p["path"]: p["seconds"] for p in json.loads(capsys.readouterr().out)["paths"]}
    clock = 1.98e9
    assert seconds["FUSED_TC"] == pytest.approx(SOURCE_CYCLES / clock)  # the calibration machine, any k
    assert seconds["FUSED_TC16"] == pytest.approx(_by_hand(k) / clock, rel=1e-3)
    # the norm lets the DRAM demand show through: the time falls by less than the FP64 budget does
    assert (seconds["FUSED_TC16"] > seconds["FUSED_TC"] / 2) == (k is not None)


def test_overlap_chooses_the_exponent_whose_transfer_misses_least(saved, tmp_path, capsys):
    model = tmp_path / "m.json"
    assert main(["model", "fit", "--profiles", str(saved / "prof"), "--build", str(saved / "build"), "--out", str(model)]) == 0
    out = tmp_path / "overlap.json"
    capsys.readouterr()
    assert main(["model", "overlap", "--pair", f"{model}:FUSED_TC={model}:FUSED_TC16", "--build",
                 str(saved / "build"), "--out", str(out), "--json"]) == 0
    choice = json.loads(capsys.readouterr().out)
    errors = {c["overlap"]: c["errors"][0]["error"] for c in choice["candidates"]}
    for k, error in errors.items():
        assert error == pytest.approx(_by_hand(k) / TARGET_CYCLES - 1, abs=1e-3)
    best = min(errors, key=lambda k: abs(errors[k]))
    assert choice["chosen"] == best == 3.0
    assert json.loads(out.read_text())["chosen"] == 3.0
    assert main(["model", "overlap", "--pair", f"{model}:FUSED_TC={model}:FUSED_TC16", "--build",
                 str(saved / "build")]) == 0
    assert "K = 3" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--overlap", "0.5"], "finite number >= 1"),
    (["--overlap", "nan"], "finite number >= 1"),
    (["--overlap", "inf"], "finite number >= 1"),
])
def test_bad_overlap_inputs_are_one_line(saved, tmp_path, capsys, argv, message):
    assert main(["model", "fit", "--profiles", str(saved / "prof"), "--build", str(saved / "build"), "--out", str(tmp_path / "m.json"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_bad_pairs_are_one_line(saved, tmp_path, capsys):
    model = tmp_path / "m.json"
    assert main(["model", "fit", "--profiles", str(saved / "prof"), "--build", str(saved / "build"), "--out", str(model)]) == 0
    capsys.readouterr()
    for pair, message in [("FUSED_TC=FUSED_TC16", "SRC.json:PATH=TGT.json:PATH"),
                          (f"{model}:FUSED={model}:FUSED_TC16", "no order has both FUSED and FUSED_TC16"),
                          (f"{tmp_path / 'none.json'}:FUSED_TC={model}:FUSED_TC16", "no such file")]:
        assert main(["model", "overlap", "--pair", pair, "--build", str(saved / "build")]) == 2, pair
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, (pair, err)


def test_a_model_file_with_a_bad_exponent_is_refused(saved, tmp_path, capsys):
    from composer.model.calibrate import content_hash

    model = tmp_path / "m.json"
    assert main(["model", "fit", "--profiles", str(saved / "prof"), "--build", str(saved / "build"), "--out", str(model)]) == 0
    body = json.loads(model.read_text())
    body.pop("hash")
    body["overlap"] = "four"
    model.write_text(json.dumps({**body, "hash": content_hash(body)}))
    capsys.readouterr()
    assert main(["model", "predict", "--model", str(model), "--machine", "h200", "--build", str(saved / "build")]) == 2
    err = capsys.readouterr().err.strip()
    assert "overlap exponent 'four'" in err and len(err.splitlines()) == 1


def test_the_exponent_is_applied_to_the_latency_terms_too(saved, tmp_path):
    """with_overlap re-derives the latency terms at the new K (here none: no restricted profile) and
    drops the loaded file's hash."""
    from composer.model.calibrate import with_overlap

    file = tmp_path / "m.json"
    assert main(["model", "fit", "--profiles", str(saved / "prof"), "--build", str(saved / "build"), "--out", str(file)]) == 0
    loaded = Model.load(file)
    changed = with_overlap(loaded, 4.0)
    assert changed.overlap == 4.0 and changed.loaded_hash is None and changed.hash != loaded.hash
    assert [k.eta_at(4.0) for k in changed.kernels] == [k.eta_at(4.0) for k in loaded.kernels]
    assert with_overlap(loaded, None).hash == loaded.hash


def test_an_order_where_the_pair_runs_different_decompositions_is_left_out(tmp_path, capsys):
    """FUSED_TC16 at p = 127 runs other kernels than FUSED_TC (s0_x against k0_x): no transfer there,
    so the choice rests on the orders that have one."""
    n_8x8x4 = 2e6 * 132 / 4
    write_profile(tmp_path / "prof", "FUSED_TC", 63, [_row("fused_tc_p63_s0_x", n_8x8x4, SOURCE_CYCLES)])
    write_profile(tmp_path / "prof", "FUSED_TC16", 63, [_row("fused_tc16_p63_s0_x", n_8x8x4 / 2, TARGET_CYCLES)])
    write_profile(tmp_path / "prof", "FUSED_TC", 127, [_row("fused_tc_p127_k0_x", n_8x8x4, SOURCE_CYCLES)])
    write_profile(tmp_path / "prof", "FUSED_TC16", 127, [_row("fused_tc16_p127_s0_x", n_8x8x4 / 2, TARGET_CYCLES)])
    write_build(tmp_path / "build", "sm_90", {"fused_tc_p63_s0_x": "8x8x4", "fused_tc16_p63_s0_x": "16x8x4",
                                              "fused_tc_p127_k0_x": "8x8x4", "fused_tc16_p127_s0_x": "16x8x4"},
                tmp_path / "nvrtc")
    model = tmp_path / "m.json"
    assert main(["model", "fit", "--profiles", str(tmp_path / "prof"), "--build", str(tmp_path / "build"),
                 "--out", str(model)]) == 0
    capsys.readouterr()
    assert main(["model", "overlap", "--pair", f"{model}:FUSED_TC={model}:FUSED_TC16", "--build",
                 str(tmp_path / "build"), "--json"]) == 0
    choice = json.loads(capsys.readouterr().out)
    assert {e["order"] for c in choice["candidates"] for e in c["errors"]} == {63}
    assert choice["chosen"] == 3.0
    assert choice["skipped"] == ["FUSED_TC16 from FUSED_TC: FUSED_TC16 p=127: k0_x (fused_tc_p127_k0_x)"]
    # a pair none of whose orders has a transfer is one line, not a crash
    write_build(tmp_path / "bare", "sm_90", {"fused_tc_p63_s0_x": "8x8x4", "fused_tc_p127_k0_x": "8x8x4"},
                tmp_path / "nvrtc")
    assert main(["model", "overlap", "--pair", f"{model}:FUSED_TC={model}:FUSED_TC16", "--build",
                 str(tmp_path / "bare")]) == 2
    err = capsys.readouterr().err.strip()
    assert "no order it calibrated has a transfer" in err and len(err.splitlines()) == 1
