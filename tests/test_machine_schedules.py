"""Machine overlays (``schedules/machines/<machine>/pNNNN.toml``): which machine's overlay applies, how its
path tables replace the order's, that every shipped overlay loads, validates and computes the reference, and
that ``sweep-fused apply --overlay`` and ``build --machine`` write and build them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from composer import dg
from composer.cli.main import main
from composer.config import schedule_files
from composer.config.machine_schedules import (MACHINE_ENV, active_machine, forget_device, note_device,
                                               overlay_machines, using_machine)
from composer.config.schedules import available_orders, load_schedule, load_schedule_file
from composer.errors import ConfigError

REPO_SCHEDULES = Path(__file__).resolve().parents[1] / "schedules"
GIB = 2**30


@pytest.fixture(autouse=True)
def no_machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No machine named by the environment or by a GPU opened earlier in this process, and no user
    schedules, unless a test sets them."""
    monkeypatch.delenv(MACHINE_ENV, raising=False)
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(tmp_path / "no-user-schedules"))
    forget_device()
    yield
    forget_device()


@pytest.fixture
def packaged_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    packaged = tmp_path / "packaged"
    shutil.copytree(REPO_SCHEDULES, packaged)
    monkeypatch.setattr(schedule_files, "packaged_dir", lambda: packaged)
    return packaged


def _overlay(packaged: Path, machine: str, order: int, text: str) -> Path:
    path = packaged / "machines" / machine / f"p{order:04d}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


H100_TABLE = '''order = 15
source = "test"
[paths.FUSED_TC16]
flux = "inline"
mma = "16x8x4"
kernels = [{ dirs = "xyz", box = [16, 16, 16], threads = 256, tile = [1, 1] }]
'''


def test_no_machine_loads_the_generic_schedule() -> None:
    assert active_machine() is None
    s = load_schedule(15)
    assert (s.machine, s.file) == ("", "p0015.toml") and "machine" not in s.provenance()
    assert s.paths == load_schedule_file(REPO_SCHEDULES / "p0015.toml").paths


def test_the_overlay_replaces_whole_path_tables_and_nothing_else(packaged_copy: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _overlay(packaged_copy, "h100_sxm", 15, H100_TABLE)
    generic = load_schedule(15)
    monkeypatch.setenv(MACHINE_ENV, "h100_sxm")
    s = load_schedule(15)
    assert s.paths["FUSED_TC16"] == {"flux": "inline", "mma": "16x8x4", "kernels": [
        {"dirs": "xyz", "box": [16, 16, 16], "threads": 256, "tile": [1, 1]}]}
    assert {k: v for k, v in s.paths.items() if k != "FUSED_TC16"} == \
        {k: v for k, v in generic.paths.items() if k != "FUSED_TC16"}
    assert (s.benchmark, s.validation, s.source) == (generic.benchmark, generic.validation, generic.source)
    assert s.provenance() == {"order": 15, "origin": "packaged", "file": "p0015.toml+machines/h100_sxm/p0015.toml",
                              "sha256": s.sha256, "machine": "h100_sxm"}
    assert s.sha256 != generic.sha256
    # another machine, or an order without an overlay: the generic file
    monkeypatch.setenv(MACHINE_ENV, "h200")
    assert load_schedule(15) == generic
    monkeypatch.setenv(MACHINE_ENV, "h100_sxm")
    assert load_schedule(31).machine == "" and load_schedule(31).file == "p0031.toml"


def test_which_machine_applies(packaged_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _overlay(packaged_copy, "h100_sxm", 15, H100_TABLE)
    h100 = SimpleNamespace(arch="sm_90", sm_count=132, total_memory=int(79.6 * GIB))
    h200 = SimpleNamespace(arch="sm_90", sm_count=132, total_memory=int(140.4 * GIB))
    assert note_device(h200) == "h200" and active_machine() == "h200"
    assert note_device(SimpleNamespace(arch="sm_75", sm_count=40, total_memory=16 * GIB)) is None
    assert note_device(h100) == "h100_sxm" and load_schedule(15).machine == "h100_sxm"
    monkeypatch.setenv(MACHINE_ENV, "generic")  # the environment over the opened GPU
    assert active_machine() is None and load_schedule(15).machine == ""
    with using_machine("h100_sxm"):  # the context over the environment
        assert load_schedule(15).machine == "h100_sxm"
        with using_machine(None):
            assert active_machine() is None
    assert active_machine() is None
    monkeypatch.setenv(MACHINE_ENV, "h999")
    with pytest.raises(ConfigError, match=r"\$COMPOSER_SCHEDULE_MACHINE: unknown machine 'h999' \(known: .*h100_sxm"):
        load_schedule(15)
    with pytest.raises(ConfigError, match="unknown machine 'nope'"):
        with using_machine("nope"):
            pass


def test_a_user_file_replaces_the_schedule_overlays_included(packaged_copy: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _overlay(packaged_copy, "h100_sxm", 15, H100_TABLE)
    user = tmp_path / "user"
    user.mkdir()
    shutil.copy(REPO_SCHEDULES / "p0015.toml", user / "p0015.toml")
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(user))
    with using_machine("h100_sxm"):
        s = load_schedule(15)
    assert (s.origin, s.machine) == ("user", "")
    assert s.paths["FUSED_TC16"] == load_schedule_file(REPO_SCHEDULES / "p0015.toml").paths["FUSED_TC16"]


@pytest.mark.parametrize("text,message", [
    (H100_TABLE.replace("order = 15", "order = 31"), "order: file declares order 31 but its name says 15"),
    (H100_TABLE + "[benchmark]\ngrid = [1, 1, 1]\n", "benchmark: a machine overlay holds only order, source"),
    ('order = 15\nsource = "x"\n', "paths: a machine overlay must replace at least one path table"),
    (H100_TABLE.replace('"16x8x4"', '"9x9x9"'), "paths.FUSED_TC16"),
    (H100_TABLE.replace("FUSED_TC16]", "FUSED_TC17]"), "FUSED_TC17: unknown path"),
    (H100_TABLE.replace('source = "test"\n', ""), "source"),
])
def test_a_bad_overlay_is_one_error_naming_its_file(packaged_copy: Path, text: str, message: str) -> None:
    _overlay(packaged_copy, "h100_sxm", 15, text)
    with using_machine("h100_sxm"), pytest.raises(ConfigError) as info:
        load_schedule(15)
    assert str(info.value).startswith("machines/h100_sxm/p0015.toml: ") and message in str(info.value)


def test_the_shipped_overlays_load_and_their_tables_compute_the_reference() -> None:
    """Every shipped overlay is a known machine's, overlays an order that ships, and each fused table it
    replaces computes the reference (the kernels emulated lane by lane on a small grid); a library path's
    table it replaces (a GEMM_FUSED overlap, say) is what that path's launch settings read there (its GPU validation is `composer bench`'s, which validates before timing)."""
    from composer.arch.machines import load_machines
    from composer.fused.config import VARIANTS, fused_config
    from composer.fused.emulate import emulate
    from composer.paths.registry import path_class

    machines = overlay_machines(schedule_files.packaged_dir())
    assert machines, "no machine overlay ships"
    checked = 0
    for machine in machines:
        assert machine in load_machines()
        for path in sorted((REPO_SCHEDULES / "machines" / machine).iterdir()):
            order = int(path.stem[1:])
            assert path.suffix == ".toml" and order in available_orders()
            generic = load_schedule(order)
            with using_machine(machine):
                s = load_schedule(order)
                assert s.machine == machine
                changed = [v for v in VARIANTS if s.paths.get(v) != generic.paths.get(v)
                           or (v == "FUSED_DFMA" and s.paths.get("FUSED_TC") != generic.paths.get("FUSED_TC"))]
                library = [p for p in sorted(set(s.paths) | set(generic.paths))
                           if p not in VARIANTS and s.paths.get(p) != generic.paths.get(p)]
                assert changed or library
                for name in library:  # the path reads the overlay's overlap keys on this machine
                    options = path_class(name).overlap_options(order, {})
                    assert options.get("overlap_sms") == s.paths[name].get("overlap_sms"), (machine, order, name)
                    checked += 1
                if not changed:
                    continue
                grid = (2, 1, 1)
                fields = dg.make_fields(order, grid, varying=True)
                ref = dg.reference_tendency(fields, order, grid)
                for variant in changed:
                    out = emulate(fused_config(variant, order), fields, grid)
                    assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-13, (machine, order, variant)
                    checked += 1
    assert checked


@pytest.mark.parametrize("fresh", [False, True], ids=["into-the-shipped-overlay", "a-new-overlay"])
def test_sweep_fused_apply_writes_a_machine_overlay(packaged_copy: Path, tmp_path: Path, fresh: bool,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from composer.fused.candidates import candidate_list, to_table
    from composer.fused.config import parse_table

    if fresh:
        shutil.rmtree(packaged_copy / "machines")
    else:  # an overlay of p = 15 without a FUSED table, which the apply below adds
        _overlay(packaged_copy, "h100_sxm", 15, H100_TABLE)
    generic = load_schedule(15)
    with using_machine("h100_sxm"):
        before = load_schedule(15)  # the shipped overlay's tables (FUSED is not among them)
    assert before.paths["FUSED"] == generic.paths["FUSED"]
    (name, cfg), = candidate_list("FUSED", 15, "strip")[1:2]
    base = candidate_list("FUSED", 15, "strip")[0][1]
    row = {"order": 15, "passed": True, "gpu": "NVIDIA H100 80GB HBM3", "machine": "h100_sxm"}
    records = [{**row, "variant": "FUSED@base", "us_per_call": 600.0, "table": to_table(base)},
               {**row, "variant": f"FUSED@{name}", "us_per_call": 500.0, "table": to_table(cfg)}]
    log = tmp_path / "sweep.json"
    log.write_text(json.dumps(records))
    # an overlay ships with the package: the directory must be named
    assert main(["sweep-fused", "apply", str(log), "--overlay"]) == 2
    assert "--overlay writes into the shipped schedules directory" in capsys.readouterr().err
    assert main(["sweep-fused", "apply", str(log), "--overlay", "--schedules-dir", str(packaged_copy),
                 "--date", "2026-01-02"]) == 0
    overlay = packaged_copy / "machines" / "h100_sxm" / "p0015.toml"
    text = overlay.read_text()
    assert text.startswith("# Machine overlay") or not fresh
    assert "H100_SXM 2026-01-02, composer.fused.sweep: 500.0 us/call (previous schedule 600.0)" in text
    assert load_schedule(15) == generic  # the generic schedule is untouched
    with using_machine("h100_sxm"):
        s = load_schedule(15)
    assert parse_table("FUSED", 15, s.paths["FUSED"]) == cfg
    assert {k: v for k, v in s.paths.items() if k != "FUSED"} == {k: v for k, v in before.paths.items() if k != "FUSED"}
    # a log whose rows name no machine-table entry cannot make an overlay
    log.write_text(json.dumps([{k: v for k, v in r.items() if k != "machine"} for r in records]))
    assert main(["sweep-fused", "apply", str(log), "--overlay", "--schedules-dir", str(packaged_copy)]) == 2
    assert "a machine overlay needs a sweep log timed on one GPU of the machine table" in capsys.readouterr().err


def test_build_plans_the_machine_s_tables() -> None:
    from composer.build.plan import plan

    machine = overlay_machines(schedule_files.packaged_dir())[0]
    orders = [int(f.stem[1:]) for f in sorted((REPO_SCHEDULES / "machines" / machine).iterdir())]
    paths = ["FUSED", "FUSED_TC", "FUSED_TC16"]
    generic = {j.name: j.key for j in plan("sm_90", orders=orders, paths=paths)}
    with using_machine(machine):
        overlaid = {j.name: j.key for j in plan("sm_90", orders=orders, paths=paths)}
    assert generic.keys() == overlaid.keys()
    # the overlay's tables where they differ from the generic ones (a table both GPUs settled on builds alike)
    assert any(generic[name] != overlaid[name] for name in generic)


def test_info_shows_the_machine_s_schedule(capsys: pytest.CaptureFixture[str]) -> None:
    machine = overlay_machines(schedule_files.packaged_dir())[0]
    order = int(sorted((REPO_SCHEDULES / "machines" / machine).iterdir())[0].stem[1:])
    assert main(["info", "--order", str(order), "--machine", machine, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["schedule"]["machine"] == machine
    assert report["grid_source"] == f"p{order:04d}.toml+machines/{machine}/p{order:04d}.toml"
    assert main(["info", "--order", str(order), "--json"]) == 0
    assert "machine" not in json.loads(capsys.readouterr().out)["schedule"]


def _shipped_overlays() -> list[tuple[str, int, list[str]]]:
    """(machine, order, the fused variants whose table its overlay changes) of every shipped overlay."""
    from composer.fused.config import VARIANTS

    found = []
    for machine in overlay_machines(schedule_files.packaged_dir()):
        for path in sorted((REPO_SCHEDULES / "machines" / machine).glob("p*.toml")):
            order = int(path.stem[1:])
            generic = load_schedule(order)
            with using_machine(machine):
                paths = load_schedule(order).paths
            changed = [v for v in VARIANTS if paths.get(v) != generic.paths.get(v)
                       or (v == "FUSED_DFMA" and paths.get("FUSED_TC") != generic.paths.get("FUSED_TC"))]
            if changed:  # a library path's overlay (a GEMM_FUSED overlap) is validated by `composer bench`
                found.append((machine, order, changed))
    return found


@pytest.mark.gpu
def test_the_opened_gpu_loads_its_machine_s_overlay() -> None:
    """Opening a Device is what names the machine (no note_device call here)."""
    from composer.arch.identify import identify_machine
    from composer.runtime.device import Device

    assert active_machine() is None
    device = Device(0)
    try:
        named = identify_machine(device.arch, device.sm_count, device.total_memory)
        assert device.machine == active_machine() == (named.name if named else None)
        for machine, order, _ in _shipped_overlays():
            assert load_schedule(order).machine == (machine if named and named.name == machine else "")
    finally:
        device.close()


@pytest.mark.gpu
@pytest.mark.parametrize("grid_kind", ["small", "s29"])
def test_every_shipped_overlay_validates_on_the_gpu(grid_kind: str) -> None:
    """Each fused table a shipped overlay changes, run on this GPU whatever machine it is, against the
    reference on the point-varying input (max|diff|/max|ref| <= 1e-12)."""
    from composer.fused.config import fused_config, one_element_form
    from composer.runtime import default_device
    from tests.test_fused_gpu import SMALL_GRIDS, assert_candidates_validate

    device = default_device()
    for machine, order, changed in _shipped_overlays():
        with using_machine(machine):
            for variant in changed:
                config = fused_config(variant, order)
                if grid_kind == "small" and config.x_pairs and SMALL_GRIDS[order][0] % 2:
                    config = one_element_form(config)  # what the path runs there (an odd x extent does not pair)
                assert_candidates_validate(device, order, grid_kind, [(machine, config)])


def test_a_copy_of_an_overlaid_schedule_holds_the_machine_s_tables(packaged_copy: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """What the sweeps write into a user directory starts from the schedule in use: on a machine with an
    overlay, the overlay's tables, not the generic ones (else the first write would undo the overlay)."""
    from composer.config.schedule_files import copy_schedules, writable_schedule_file

    _overlay(packaged_copy, "h100_sxm", 15, H100_TABLE)
    with using_machine("H100_SXM"):  # names in any case
        runs = load_schedule(15)
        target = writable_schedule_file(15, tmp_path / "user")
        copied = copy_schedules(tmp_path / "copies")
    assert runs.machine == "h100_sxm"
    for path in (target, next(p for p in copied if p.name == "p0015.toml")):
        s = load_schedule_file(path)
        assert s.paths == runs.paths and s.benchmark == runs.benchmark and s.validation == runs.validation
    assert "machines/h100_sxm/p0015.toml" in target.read_text().splitlines()[0]
    assert load_schedule_file(tmp_path / "copies" / "p0031.toml").paths == load_schedule(31).paths


def test_an_overlay_takes_winners_measured_against_the_machine_s_own_table(packaged_copy: Path, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A log whose baseline is the generic FUSED_TC16 table (planned without --machine) cannot replace the
    h100_sxm overlay's FUSED_TC16: its winner never ran against the table it would replace."""
    from composer.fused.candidates import to_table
    from composer.fused.config import fused_config

    _overlay(packaged_copy, "h100_sxm", 15, H100_TABLE)  # an overlay table unlike the generic one, whatever ships
    row = {"order": 15, "passed": True, "gpu": "NVIDIA H100 80GB HBM3", "machine": "h100_sxm"}
    generic = fused_config("FUSED_TC16", 15)
    with using_machine("h100_sxm"):
        assert fused_config("FUSED_TC16", 15) != generic
    records = [{**row, "variant": "FUSED_TC16@shipped", "us_per_call": 560.0, "table": to_table(generic)},
               {**row, "variant": "FUSED_TC16@other", "us_per_call": 540.0, "table": to_table(generic)}]
    log = tmp_path / "sweep.json"
    log.write_text(json.dumps(records))
    assert main(["sweep-fused", "apply", str(log), "--overlay", "--schedules-dir", str(packaged_copy)]) == 2
    err = capsys.readouterr().err
    assert "p15 FUSED_TC16: the sweep's baseline (shipped) is not the table h100_sxm runs now" in err
    assert "sweep-fused check --machine h100_sxm" in err


def test_sweep_fused_check_plans_against_the_machine_s_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tomllib

    from composer.fused.config import fused_config, parse_table
    pytest.importorskip("cuda.bindings.nvrtc")  # the check compiles the plan's tables
    monkeypatch.setenv("COMPOSER_CACHE_DIR", str(tmp_path / "cache"))
    plan = tmp_path / "plan.json"
    assert main(["sweep-fused", "check", "--orders", "15", "--subset", "tile_swizzle", "--only", "no such label",
                 "--machine", "h100_sxm", "--workers", "1", "--plan", str(plan)]) == 0
    rows = json.loads(plan.read_text())["15"]["FUSED_TC16"]
    base = next(r for r in rows if r["label"] == "base")
    with using_machine("h100_sxm"):
        assert parse_table("FUSED_TC16", 15, tomllib.loads(base["table"])["paths"]["FUSED_TC16"]) == \
            fused_config("FUSED_TC16", 15)
