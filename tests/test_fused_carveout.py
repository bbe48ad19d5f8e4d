"""The fused paths' ``carveout`` option (the preferred L1/shared split of the volume kernels) on the GPU: the
kernels still match the reference, and the path says what the split gave them (shared memory, L1, blocks per
SM). The split's arithmetic is tested on the CPU in tests/test_arch.py."""

from __future__ import annotations

import numpy as np
import pytest

from composer.errors import ConfigError

pytestmark = pytest.mark.gpu


def _problem(order: int, grid: tuple[int, int, int]):
    from composer import dg
    from composer.paths.problem import DeviceProblem
    from composer.runtime import default_device

    fields = dg.make_fields(order, grid, varying=True)
    return DeviceProblem.upload(fields, order, grid, default_device()), dg.reference_tendency(fields, order, grid)


@pytest.mark.parametrize("variant,percent", [("FUSED_TC", 64), ("FUSED_TC", 50), ("FUSED", 50), ("FUSED_TC16", 64)])
def test_a_carveout_keeps_the_result_and_reports_its_split(variant: str, percent: int) -> None:
    from composer.paths.registry import path_class

    problem, ref = _problem(7, (3, 2, 2))
    path = path_class(variant)(problem, carveout=percent)
    from composer.arch.limits import arch_limits

    store_kib = arch_limits(problem.device.arch).l1_shared_per_sm // 1024  # 256 on sm_90
    split = path.diagnostics()["carveout"]
    assert split and all(s["percent"] == percent and s["smem_kib"] + s["l1_kib"] == store_kib and s["blocks_per_sm"] >= 1
                         for s in split.values())
    # the arch table's count against the driver's occupancy calculator (which the preferred split may not bind:
    # it is a hint), printed for the record; the table's count must not exceed what the calculator allows
    print({name: (s["blocks_per_sm"], s["blocks_per_sm_calculator"]) for name, s in split.items()})
    assert all(s["blocks_per_sm"] <= s["blocks_per_sm_calculator"] for s in split.values())
    problem.dqdt.copy_from(np.full(ref.shape, np.nan), problem.stream)
    path.launch(problem.ptr("q"), problem.dqdt.ptr)
    out = problem.download(problem.dqdt)
    assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) <= 1e-12


def test_a_carveout_that_holds_no_block_or_fights_resident_is_refused_in_one_line() -> None:
    from composer.paths.registry import path_class

    problem, _ = _problem(7, (2, 1, 1))
    with pytest.raises(ConfigError, match=r"carveout 0 % gives 0 KiB of shared memory per SM, less than one block"):
        path_class("FUSED_TC")(problem, carveout=0)
    with pytest.raises(ConfigError, match="and the option resident both set the shared-memory split"):
        path_class("FUSED_TC")(problem, carveout=64, resident=2)
    streamed, _ = _problem(127, (1, 1, 1))  # FUSED_TC16's p = 127 table streams, as the key's check refuses too
    with pytest.raises(ConfigError, match="a carveout applies to the box kernel; this table streams"):
        path_class("FUSED_TC16")(streamed, carveout=50)


def test_a_table_s_carveout_reaches_its_kernels_and_the_option_wins_over_it() -> None:
    import dataclasses

    from composer.fused.config import fused_config
    from composer.paths.registry import path_class

    problem, ref = _problem(7, (3, 2, 2))
    config = dataclasses.replace(fused_config("FUSED_TC", 7), carveout=57)
    path = path_class("FUSED_TC")(problem, config=config)
    assert {s["percent"] for s in path.diagnostics()["carveout"].values()} == {57}
    problem.dqdt.copy_from(np.full(ref.shape, np.nan), problem.stream)
    path.launch(problem.ptr("q"), problem.dqdt.ptr)
    assert np.max(np.abs(problem.download(problem.dqdt) - ref)) / np.max(np.abs(ref)) <= 1e-12
    overridden = path_class("FUSED_TC")(problem, config=config, carveout=71)
    assert {s["percent"] for s in overridden.diagnostics()["carveout"].values()} == {71}
