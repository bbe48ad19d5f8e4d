"""`composer bench`'s roof fractions divide by the capacities of the GPU the run opened (its machine-table
entry), not always the H200's: on an H100 SXM5 the byte roof is 3.35 TB/s. A GPU the table does not know
falls back to the default machine with a note."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from composer.arch.machines import DEFAULT_MACHINE, get_machine
from composer.cli.bench import roof_machine


def test_the_opened_gpu_names_the_roof() -> None:
    h100 = roof_machine(SimpleNamespace(arch="sm_90", sm_count=132, total_memory=85_017_493_504,
                                        name="NVIDIA H100 80GB HBM3"))  # as the device tool's H100 reports itself
    assert h100 == get_machine("h100_sxm") and h100.hbm_bandwidth != get_machine("h200").hbm_bandwidth


def test_an_unknown_gpu_falls_back_with_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    machine = roof_machine(SimpleNamespace(arch="sm_90", sm_count=7, total_memory=1 << 30, name="Some GPU"))
    assert machine == get_machine(DEFAULT_MACHINE)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Some GPU is not in the machine table" in err and "--machine" in err


def test_an_unknown_machine_name_is_one_line_before_any_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    from composer.cli.main import main

    assert main(["bench", "--paths", "GEMM", "--orders", "7", "--machine", "nope"]) != 0
    err = capsys.readouterr().err.strip()
    assert "unknown machine 'nope'" in err and "\n" not in err and "Traceback" not in err
