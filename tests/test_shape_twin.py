"""The shape twins (FUSED_TC's table on 16x8x4) and the gzipped profiles the model reads."""

from __future__ import annotations

import dataclasses
import gzip
import shutil
from pathlib import Path

import pytest

from composer.errors import ComposerError
from composer.fused.candidates import candidate_list, shape_twin, shape_twin_candidates
from composer.fused.config import fused_config
from composer.model.counters import profile_files, read_profile_csv
from composer.model.measured import read_measured

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ROOT / "docs" / "data" / "h200_s19" / "call6" / "prof" / "tc"


@pytest.mark.parametrize("order", [15, 63, 127, 255])
def test_twin_differs_only_in_shape(order: int) -> None:
    source = fused_config("FUSED_TC", order)
    twin = shape_twin(source)
    assert twin is not None and twin.variant == "FUSED_TC16" and twin.mma == "16x8x4"
    assert [k.tile for k in twin.kernels] == [(k.tile[0] // 2, k.tile[1]) for k in source.kernels]
    # everything else, the compiler included, is the source's
    back = dataclasses.replace(twin, variant="FUSED_TC", mma="8x8x4", kernels=source.kernels)
    assert back == source


def test_twin_needs_even_wm_and_an_8_row_source() -> None:
    p7 = fused_config("FUSED_TC", 7)
    assert p7.kernels[0].tile[0] == 1 and shape_twin(p7) is None
    with pytest.raises(ComposerError, match="8x8x4 FUSED_TC"):
        shape_twin(fused_config("FUSED_TC16", 15))


def test_twin_family() -> None:
    # p = 31's shipped FUSED_TC16 table is already FUSED_TC's twin: nothing to add
    assert shape_twin_candidates("FUSED_TC16", 31) == []
    assert shape_twin_candidates("FUSED_TC", 15) == []
    names = [name for name, _ in candidate_list("FUSED_TC16", 15, "shape_twin")]
    assert names[0] == "base" and len(names) == 2 and "tile[1, 2]" in names[1]


def test_gzipped_profiles_read_like_plain_ones(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    shutil.copy(PROFILES / "profile.json", plain / "profile.json")
    for file in PROFILES.glob("*.csv.gz"):
        (plain / file.name[:-3]).write_bytes(gzip.decompress(file.read_bytes()))
    gz, raw = profile_files(PROFILES), profile_files(plain)
    assert set(gz) == set(raw) == {("FUSED_TC", 7), ("FUSED_TC", 15), ("FUSED_TC", 31)}
    for key in gz:
        assert read_profile_csv(gz[key]) == read_profile_csv(raw[key])
    times = {(c.path, c.order): c.seconds for c in read_measured(PROFILES)}
    assert times == {(c.path, c.order): c.seconds for c in read_measured(plain)}
    assert 450e-6 < times[("FUSED_TC", 7)] < 460e-6  # the ncu duration of fused_tc_p7_k0_xyz, 456.16 us
