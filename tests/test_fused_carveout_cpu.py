"""The fused tables' ``carveout`` key and the ``carveout`` candidate family, on the CPU: the key's checks,
its table round trip, and that a carveout changes no kernel source (the split is a launch attribute, so the
sweep compiles nothing new for it). The GPU side is tests/test_fused_carveout.py."""

from __future__ import annotations

import dataclasses
import tomllib

import pytest

from composer.errors import ConfigError
from composer.fused.builder import kernel_plans, render_volume
from composer.fused.candidates import CARVEOUT_PERCENTS, carveout_candidates, label, to_table
from composer.fused.config import fused_config, parse_table

# the p = 7 and 15 tables these families start from (tests/conftest.py, xfaces_tables)
pytestmark = pytest.mark.usefixtures("xfaces_tables")

BOX7 = {"flux": "inline", "kernels": [{"dirs": "xyz", "box": [8, 8, 8], "threads": 128, "tile": [1, 4]}]}


@pytest.mark.parametrize("value,message", [(0, "got 0"), (101, "got 101"),
                                           ("50", "got '50'"), (True, "got True"), (50.0, "got 50.0")])
def test_the_key_is_a_percentage(value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=rf"paths.FUSED.carveout: expected a percentage, an integer in \[1, 100\], {message}"):
        parse_table("FUSED", 7, {**BOX7, "carveout": value})


def test_the_key_is_for_box_kernels() -> None:
    assert parse_table("FUSED", 7, {**BOX7, "carveout": 57}).carveout == 57
    assert parse_table("FUSED", 7, BOX7).carveout is None
    from composer.config.schedules import load_schedule

    streamed = dict(load_schedule(511).paths["FUSED_TC16"])
    with pytest.raises(ConfigError, match="carveout: applies to the box kernel"):
        parse_table("FUSED_TC16", 511, {**streamed, "carveout": 57})


@pytest.mark.parametrize("variant,order", [("FUSED", 7), ("FUSED_TC", 7), ("FUSED_TC16", 7), ("FUSED_TC16", 15),
                                           ("FUSED_TC", 31)])
def test_the_family_varies_only_the_split(variant: str, order: int) -> None:
    base = fused_config(variant, order)
    found = carveout_candidates(variant, order)
    assert [c.carveout for _, c in found] == list(CARVEOUT_PERCENTS)
    for name, config in found:
        assert dataclasses.replace(config, carveout=None) == base and name == label(config)
        assert name.endswith(f" cv{config.carveout}")
        table = tomllib.loads(to_table(config))["paths"][variant]
        assert parse_table(variant, order, table) == config  # what `sweep-fused apply` writes reads back
        for plan, base_plan in zip(kernel_plans(config), kernel_plans(base)):
            assert render_volume(config, plan) == render_volume(base, base_plan)  # no new kernel to compile


def test_no_family_where_the_schedule_streams() -> None:
    assert carveout_candidates("FUSED_TC16", 511) == []


def test_the_family_keeps_only_splits_below_the_driver_s() -> None:
    """FUSED p = 15: two blocks of 80 KB (+1 reserved) take 162 KB, so the driver's split is already 164 KB (ncu
    reports the split it chose, `launch__shared_mem_config_size`: 164 KB for FUSED p = 7's nine blocks on an
    H100, session 33 call 4): 71 % (164 KB) would re-time the base and is left out; 57 and 43 % stay."""
    assert [c.carveout for _, c in carveout_candidates("FUSED", 15)] == [57, 43]
