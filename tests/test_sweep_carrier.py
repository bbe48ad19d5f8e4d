"""composer sweep-carrier: the candidate list, the validate-then-time choice and the write."""

from __future__ import annotations

import argparse
import tomllib
from dataclasses import replace

import pytest

from composer.config.schedules import load_schedule
from composer.epilogues import carrier_sweep as cs
from composer.epilogues.settings import fused_settings


def _cands(order: int, arch: str = "sm_90") -> list[cs.Candidate]:
    return cs.candidates(order, load_schedule(order).paths, arch)


@pytest.mark.parametrize("order", [7, 63, 511])
def test_candidates_fold_only_with_z_and_never_cublas_carrier(order: int) -> None:
    cands = _cands(order)
    assert {c.carrier for c in cands} == {"x", "y", "z"}
    assert all(c.carrier == "z" for c in cands if c.fold)
    assert any(c.fold for c in cands) and {c.flux for c in cands} == {"array", "mainloop", "staged"}
    for c in cands:
        if c.settings is not None:
            assert c.settings.library[c.carrier] == "cute"
            assert c.settings.carrier == c.carrier and c.settings.fold == c.fold
    shipped = [c for c in cands if c.shipped]
    assert len(shipped) == 12  # one per legal (carrier, fold, flux)
    assert all(c.label.endswith("tile=shipped") for c in shipped)


def test_mainloop_flux_skipped_where_shipped_tile_has_no_room() -> None:
    # p = 511 before session 10 gave its 16x8x8 CuTe GEMMs their own tiles: the x GEMM on GEMM_CUTE's
    # 128x128x32 3-stage tile, whose factor tile does not fit beside it
    import copy

    paths = copy.deepcopy(load_schedule(511).paths)
    del paths["GEMM_CUTE"]["tiles"]["16x8x8"]
    cands = cs.candidates(511, paths, "sm_90")
    skipped = [c for c in cands if c.shipped and c.flux == "mainloop" and c.settings is None]
    assert skipped and all("shared memory" in c.skipped for c in skipped)
    assert all(c.settings is not None for c in cands if c.flux == "array")


def test_alternative_tiles_validate_for_arch() -> None:
    for c in _cands(63):
        if not c.shipped:
            for gemm in c.settings.gemms().values():
                gemm.config.validate("sm_90")
            assert c.tile != next(s.tile for s in _cands(63) if s.shipped and s.label.split(",tile")[0]
                                  == c.label.split(",tile")[0])


def test_missing_kernels_named_with_build_command(tmp_path, capsys) -> None:
    from composer.cli.main import main

    assert main(["sweep-carrier", "--order", "7", "--dry-run", "--build-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "not built" in out and "--fused-variants all" in out
    assert f"--out {tmp_path}" in out


def _runnable(cands):
    return [replace(c, missing=()) for c in cands if c.settings is not None]


def test_winner_is_fastest_validated_and_failed_never_timed() -> None:
    cands = _runnable(_cands(7))[:4]
    times = {cands[0].label: 3.0, cands[1].label: 1.0, cands[2].label: 2.0, cands[3].label: 0.5}
    failing = cands[3].label  # the fastest, but wrong
    timed: list[str] = []

    def validate(c):
        return (c.label != failing, "fake")

    def measure(c):
        timed.append(c.label)
        return times[c.label]

    result = cs.sweep(cands, validate, measure, rounds=3)
    assert result.winner.label == cands[1].label
    assert failing not in timed and failing not in result.samples
    assert set(result.verdicts) == set(times)
    assert timed.count(cands[1].label) == 3


def test_unbuilt_candidate_never_validated() -> None:
    cands = _cands(7)
    built = replace(cands[0], missing=())
    unbuilt = replace(cands[1], missing=("x: no kernel",))
    seen = []
    result = cs.sweep([built, unbuilt], lambda c: (seen.append(c.label) or True, ""), lambda c: 1.0, 2)
    assert seen == [built.label] and result.winner.label == built.label


def _cli_args(tmp_path, **kw):
    ns = dict(order=7, mma=None, arch="sm_90", build_dir=str(tmp_path / "build"), rounds=2, calls=1,
              schedules_dir=str(tmp_path / "user"), dry_run=False)
    ns.update(kw)
    return argparse.Namespace(**ns)


def test_cli_writes_winner_to_user_dir_only(tmp_path, monkeypatch, capsys) -> None:
    from composer.cli import sweep_carrier
    from composer.packaged import packaged_dir

    cands = _cands(7)
    pick = next(c for c in cands if c.carrier == "z" and c.fold and c.flux == "array" and not c.shipped)
    monkeypatch.setattr(sweep_carrier, "with_build", lambda cs_, entries, arch: _runnable(cs_))
    failing = {c.label for c in cands if c.carrier == "x"}
    closed = []

    def steps(order, build_dir, calls):
        return ((lambda c: (c.label not in failing, "fake")),
                (lambda c: 0.5 if c.label == pick.label else (0.1 if c.label in failing else 1.0)),
                lambda: closed.append(True))

    packaged_before = {p.name: p.read_bytes() for p in packaged_dir().iterdir() if p.name.endswith(".toml")}
    assert sweep_carrier.run(_cli_args(tmp_path), steps=steps) == 0
    assert closed == [True]
    written = tmp_path / "user" / "p0007.toml"
    table = tomllib.loads(written.read_text())["paths"]["GEMM_FUSED"]
    assert table["carrier"] == "z" and table["fold"] is True and table["flux"] == "array"
    assert table["carrier_tile"] == dict(pick.tile)
    # the written table resolves to the winner's settings
    paths = tomllib.loads(written.read_text())["paths"]
    assert dict(fused_settings(7, paths).carrier_tile) == dict(pick.tile)
    assert {p.name: p.read_bytes() for p in packaged_dir().iterdir() if p.name.endswith(".toml")} == packaged_before
    assert pick.label in capsys.readouterr().out


def test_only_keeps_the_matching_candidates_and_the_schedule_setting(tmp_path, monkeypatch, capsys) -> None:
    from composer.cli import sweep_carrier
    from composer.errors import ComposerError

    monkeypatch.setattr(sweep_carrier, "with_build", lambda cs_, entries, arch: _runnable(cs_))
    own = fused_settings(7, load_schedule(7).paths)
    validated = []
    steps = lambda o, b, c: ((lambda cand: (validated.append(cand.label) or True, "0")), (lambda cand: 1.0),
                             lambda: None)
    assert sweep_carrier.run(_cli_args(tmp_path, only=["carrier=z,fold=on"]), steps=steps) == 0
    reference = (f"carrier={own.carrier},fold={'on' if own.fold else 'off'},flux={own.flux},tile=shipped")
    assert validated[0] == reference
    assert validated[1:] and all("carrier=z,fold=on" in label for label in validated[1:])
    assert len(set(validated)) == len(validated)
    with pytest.raises(ComposerError, match="--only nothing-like-this: no candidate of p=7 matches"):
        sweep_carrier.run(_cli_args(tmp_path, only=["nothing-like-this"]), steps=steps)
    # matches that cannot run: an error, not a sweep of the reference alone that rewrites the schedule
    monkeypatch.setattr(sweep_carrier, "with_build", lambda cs_, entries, arch: [
        c if c.shipped and (c.carrier, c.fold, c.flux) == (own.carrier, own.fold, own.flux)
        else replace(c, missing=("y: no kernel",)) for c in _runnable(cs_)])
    with pytest.raises(ComposerError, match="no matching candidate can run"):
        sweep_carrier.run(_cli_args(tmp_path / "second", only=["carrier=z,fold=on"]), steps=steps)
    assert not (tmp_path / "second" / "user").exists()


def test_cli_nothing_written_when_all_fail(tmp_path, monkeypatch) -> None:
    from composer.cli import sweep_carrier
    from composer.errors import ComposerError

    monkeypatch.setattr(sweep_carrier, "with_build", lambda cs_, entries, arch: _runnable(cs_))
    steps = lambda o, b, c: ((lambda cand: (False, "1e-3")), (lambda cand: pytest.fail("timed")), lambda: None)
    with pytest.raises(ComposerError, match="no GEMM_FUSED candidate passed validation"):
        sweep_carrier.run(_cli_args(tmp_path), steps=steps)
    assert not (tmp_path / "user").exists()


def test_write_winner_keeps_other_tables(tmp_path) -> None:
    target = tmp_path / "p0007.toml"
    target.write_text('# note\n[paths.GEMM_FUSED]\ncarrier = "x"\nstore_group = 2\n\n[paths.GEMM_CUTE]\nmma = "16x8x4"\n')
    win = next(c for c in _cands(7) if c.carrier == "y" and c.settings is not None)
    cs.write_winner(target, win)
    data = tomllib.loads(target.read_text())
    assert data["paths"]["GEMM_FUSED"]["carrier"] == "y" and data["paths"]["GEMM_FUSED"]["store_group"] == 2
    assert data["paths"]["GEMM_CUTE"] == {"mma": "16x8x4"} and target.read_text().startswith("# note")


def _gpu_build(tmp_path, order: int, variants: str):
    """A build holding GEMM_FUSED's ``variants`` at ``order``: ``$COMPOSER_BUILD_DIR`` when it has
    them (the GPU host has no CuTe DSL: builds are carried there), else built here."""
    import os
    from pathlib import Path

    from composer.runtime.device import ensure_context
    from composer.runtime.manifest import read_manifest

    arch = ensure_context(None).arch
    carried = os.environ.get("COMPOSER_BUILD_DIR")
    if carried and (Path(carried) / "manifest.json").is_file():
        return arch, Path(carried), read_manifest(Path(carried) / "manifest.json")
    pytest.importorskip("cutlass", reason="no CuTe DSL here and no $COMPOSER_BUILD_DIR build carried")
    from composer.build import build, plan

    out = tmp_path / "build"
    build(plan(arch, None, [order], ["GEMM_FUSED"], variants), out)
    return arch, out, read_manifest(out / "manifest.json")


def _gpu_sweep(order: int, build_dir, cands):
    """Validate ``cands`` on the GPU (each must pass), then time them in two interleaved rounds."""
    from composer.cli.sweep_carrier import gpu_steps

    validate, measure, close = gpu_steps(order, str(build_dir), 2)
    try:
        result = cs.sweep(cands, validate, measure, rounds=2)
    finally:
        close()
    assert all(ok for ok, _ in result.verdicts.values()), result.verdicts
    return result


@pytest.mark.gpu
def test_gpu_sweep_two_candidates_p7(tmp_path) -> None:
    """Two z-carrier candidates at p = 7, validated and timed on the GPU."""
    arch, out, entries = _gpu_build(tmp_path, 7, "all")
    cands = cs.with_build(_cands(7, arch), entries, arch)
    two = [c for c in cands if c.runnable and c.carrier == "z" and c.flux == "array"][:2]
    assert len(two) == 2
    result = _gpu_sweep(7, out, two)
    assert result.winner is not None and result.winner.label in {c.label for c in two}


# --- carrier tiles and MMA shapes (composer.epilogues.carrier_tiles, --fused-variants tiles) -------


def test_tiles_only_sweeps_the_schedule_setting_on_library_tiles_and_shapes() -> None:
    from composer.epilogues.carrier_tiles import LIBRARY_TILES

    paths = load_schedule(511).paths
    scheduled = fused_settings(511, paths)
    cands = cs.candidates(511, paths, "sm_90", tiles_only=True)
    assert {(c.carrier, c.fold, c.flux) for c in cands} == {(scheduled.carrier, scheduled.fold, scheduled.flux)}
    assert cands[0].shipped and cands[0].mma == ""
    shapes = {c.mma or scheduled.mma for c in cands}
    assert shapes == {"16x8x4", "16x8x8"}
    for library in LIBRARY_TILES:  # each of cuBLAS's tiles with each shape (the shipped one counted once)
        for shape in shapes:
            assert any(all(c.tile[k] == v for k, v in library.items()) and (c.mma or scheduled.mma) == shape
                       for c in cands), (library, shape)
    labels = [c.label for c in cands]
    assert len(labels) == len(set(labels))
    alt = next(c for c in cands if c.mma)
    assert alt.options()["mma"] == alt.mma and f",mma={alt.mma}" in alt.label
    # sm_80 has one shape: only the schedule's (which it must run) is tried
    assert all(not c.mma for c in cs.candidates(63, load_schedule(63).paths, "sm_80", "8x8x4", tiles_only=True))


def test_tile_build_names_tag_only_the_carrier_and_hold_every_candidate() -> None:
    from composer.build.plan import gemm_fused_jobs
    from composer.epilogues.carrier_tiles import tile_tag

    paths = load_schedule(63).paths
    cands = [c for c in cs.candidates(63, paths, "sm_90", tiles_only=True) if c.settings is not None]
    jobs = gemm_fused_jobs(63, "sm_90", variants="tiles")
    names = [j.name for j in jobs]
    assert len(names) == len(set(names))
    for c in cands:
        if c.shipped:
            continue
        tag = "_" + tile_tag(c.tile)
        carried = [j for j in jobs if j.name.endswith(tag) and j.spec["role"] == c.carrier]
        assert carried, c.label
        assert all(j.spec["config"]["bm"] == c.tile["bm"] and j.spec["config"]["stages"] == c.tile["stages"]
                   for j in carried)
    assert not any(tile_tag(c.tile) in j.name for c in cands for j in jobs if j.spec["role"] != c.carrier
                   and not c.shipped)


def test_find_gemm_entry_picks_the_entry_of_the_tile() -> None:
    """One build holds several tiles of one carrier: the path loads the one its settings name, and
    says which it found when none matches."""
    from composer.gemm.cute.config import GemmConfig
    from composer.paths.gemm_cute import find_gemm_entry
    from composer.runtime.manifest import KernelEntry

    paths = load_schedule(511).paths
    cands = [c for c in cs.candidates(511, paths, "sm_90", tiles_only=True) if c.settings is not None and not c.mma]
    configs = [c.settings.gemms()[c.carrier].config for c in cands[:3]]
    tree = cands[0].settings.gemms()[cands[0].carrier]

    def entry(i: int, cfg: GemmConfig) -> KernelEntry:
        return KernelEntry(symbol=f"k{i}", cubin=f"k{i}.cubin", sha256="0" * 64, block=(128, 1, 1), dynamic_smem=0,
                           params=(), grid_rule={}, arch="sm_90",
                           config={"kind": "cute_gemm", "order": 511, "role": "y", "mma": cands[0].settings.mma,
                                   "gemm": cfg.to_dict(), "epilogue": {"text": tree.describe()["text"]}})

    entries = [entry(i, c) for i, c in enumerate(configs)]
    from composer.epilogues.tree import text

    for i, cfg in enumerate(configs):
        found = find_gemm_entry(entries, 511, "y", cands[0].settings.mma, "sm_90", text(tree.tree), "", cfg)
        assert found.symbol == f"k{i}"
    assert find_gemm_entry(entries[1:], 511, "y", cands[0].settings.mma, "sm_90", text(tree.tree)).symbol == "k1"


def test_candidate_that_cannot_run_fails_its_validation_and_the_sweep_goes_on() -> None:
    from composer.errors import ComposerError
    from composer.paths.problem import DoesNotFitError

    cands = _runnable(_cands(7))[:3]
    too_big = cands[0].label

    def validate(c):
        if c.label == too_big:
            raise DoesNotFitError("path GEMM_FUSED at p=1023 needs 136.3 GiB; 133.4 GiB usable")
        return True, "fake"

    result = cs.sweep(cands, validate, lambda c: 1.0 + len(c.label) * 1e-3, rounds=2)
    ok, why = result.verdicts[too_big]
    assert not ok and why.startswith("did not run: ") and "136.3 GiB" in why
    assert too_big not in result.samples and result.winner is not None


def test_a_fault_ends_the_sweep_with_its_own_message() -> None:
    """Only a candidate too large for memory is passed over; any other error (a kernel fault leaves the
    context dead for every later candidate) stops the sweep."""
    from composer.errors import ComposerError

    cands = _runnable(_cands(7))[:2]

    def validate(c):
        raise ComposerError("CUDA_ERROR_ILLEGAL_ADDRESS in dgemm_p0007_y_m16_8_4_carry")

    with pytest.raises(ComposerError, match="ILLEGAL_ADDRESS"):
        cs.sweep(cands, validate, lambda c: 1.0, rounds=1)


@pytest.mark.gpu
def test_gpu_sweep_two_carrier_tiles_p511(tmp_path) -> None:
    """Two carrier tiles of the schedule's p = 511 setting from one tiles build (the shipped one and a
    tagged alternative), each validated against the reference, then timed."""
    arch, out, entries = _gpu_build(tmp_path, 511, "tiles")
    cands = cs.with_build(cs.candidates(511, load_schedule(511).paths, arch, tiles_only=True), entries, arch)
    runnable = [c for c in cands if c.runnable]
    two = [next(c for c in runnable if c.shipped), next(c for c in runnable if not c.shipped and not c.mma)]
    assert set(_gpu_sweep(511, out, two).samples) == {c.label for c in two}


def test_a_carrier_store_group_is_its_own_kernel_in_the_build() -> None:
    """Two carriers of one tile with different store groups: the sweep and the path each find the
    entry of their group, and a build holding only the other group's is named as missing."""
    from types import SimpleNamespace

    from composer.gemm.cute.tiles import role_kernel
    from composer.paths.gemm_cute import find_gemm_entry

    cfg = role_kernel("y", 512, 1, "16x8x8", {"bm": 128, "bn": 64, "bk": 16, "warps_m": 2, "warps_n": 2,
                                              "stages": 3}).config
    def entry(group):
        return SimpleNamespace(arch="sm_90", symbol=f"k_g{group}", config={
            "kind": "cute_gemm", "order": 511, "role": "y", "mma": "16x8x8", "gemm": cfg.to_dict(),
            "epilogue": {"text": "tree", "store_group": group}})
    entries = [entry(4), entry(16)]
    assert find_gemm_entry(entries, 511, "y", "16x8x8", "sm_90", "tree", "", cfg, 16).symbol == "k_g16"
    assert find_gemm_entry(entries, 511, "y", "16x8x8", "sm_90", "tree", "", cfg, 4).symbol == "k_g4"
    assert find_gemm_entry(entries[1:], 511, "y", "16x8x8", "sm_90", "tree", "", cfg, 8).symbol == "k_g16"
    cands = cs.candidates(511, load_schedule(511).paths, "sm_90", tiles_only=True)
    labels = [c.label for c in cands]
    assert any(label.endswith(".g16") for label in labels)
    g16 = next(c for c in cands if c.label.endswith(".g16"))
    assert g16.settings.gemms()["y"].store_group == 16


def test_async_epilogue_carriers_are_built_always_and_swept_on_request() -> None:
    """The asynchronous-epilogue carriers (not yet run on a GPU, where a barrier bug hangs) are in
    `composer build --fused-variants tiles` but in a sweep only with --async-epilogue; their kernel
    names carry the tag the model reads."""
    from composer.build.plan import plan
    from composer.model.kernels import _CUTE

    paths = load_schedule(511).paths
    default = [c.label for c in cs.candidates(511, paths, "sm_90", tiles_only=True)]
    opted = [c.label for c in cs.candidates(511, paths, "sm_90", tiles_only=True, async_epilogue=True)]
    assert not any(".ae" in label for label in default)
    assert {label.split("tile=")[1] for label in opted if ".ae" in label} == {
        "bm128.bn64.bk16.w2x2.s3.ae4", "bm128.bn64.bk16.w2x2.s3.ae8", "bm64.bn64.bk16.w2x2.s4.ae4",
        "bm64.bn64.bk16.w2x2.s4.ae8", "bm64.bn64.bk16.w2x2.s4.ae4.b1.mb2", "bm64.bn64.bk16.w2x2.s4.ae8.b1.mb2"}
    names = [j.name for j in plan("sm_90", "16x8x8", [511], ["GEMM_FUSED"], fused_variants="tiles")]
    assert "dgemm_p0511_y_m16_8_8_carry_t128x64x16w2x2s3ae4" in names
    assert _CUTE.match("dgemm_p0511_y_m16_8_8_carry_t128x64x16w2x2s3ae4_0").group(8) == "_t128x64x16w2x2s3ae4"
    for tag in ("_t64x64x16w2x2s4ae8b1mb2", "_t64x64x16w2x2s4mb3"):  # session 12's two- and three-block carriers
        assert tag[1:] + "_0" in {n.split("carry_")[-1] + "_0" for n in names}
        assert _CUTE.match(f"dgemm_p0511_y_m16_8_8_carry{tag}_0").group(8) == tag
