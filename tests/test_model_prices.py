"""The machine table as the model reads it: Table 6 reproduced from the capacities, Table 5's HBM
bytes per SM cycle, every capacity sourced, and the errors of a machine that cannot be priced."""

from __future__ import annotations

import json

import pytest

from composer.arch.machines import get_machine, load_machines
from composer.cli.main import main
from composer.errors import ConfigError
from composer.model.capacity import capacities
from composer.model.errors import MissingCapacityError
from composer.model.prices import machine_prices

from tests.model_fixtures import MACHINES_FILE

# Table 6 of the paper: (machine, shape) -> (F_DMMA, F_DMMA / C_tc, c_tc), three decimals as printed
TABLE_6 = {
    ("gb200", "m8n8k4"): (512, 4.003, 4.003),
    ("a100", "m8n8k4"): (512, 3.997, 4.000),
    ("h100", "m8n8k4"): (512, 2.000, 4.000),
    ("h100", "m16n8k4"): (1024, 4.000, 4.000),
    ("h100", "m16n8k8"): (2048, 8.000, 8.000),
    ("h100", "m16n8k16"): (4096, 16.000, 16.000),
}


@pytest.fixture(autouse=True)
def _worktree_machines(monkeypatch):
    """Read this tree's machine table (an editable install may package another checkout's)."""
    monkeypatch.setenv("COMPOSER_MACHINES", str(MACHINES_FILE))


def test_table_6_reproduced_from_the_capacities():
    got = {}
    for name in ("gb200", "a100", "h100"):
        for row in machine_prices(get_machine(name))["dmma"]:
            got[(name, row["shape"])] = (row["flop"], round(row["flop_price"], 3), round(row["c_tc"], 3))
    assert got == TABLE_6
    # the floor binds only on H100 (m8n8k4), among the paper's machines
    binds = {(r["machine"], r["shape"]) for n in ("gb200", "a100", "h100")
             for r in machine_prices(get_machine(n))["dmma"] if r["floor_binds"]}
    assert binds == {("a100", "m8n8k4"), ("h100", "m8n8k4")}  # A100: 3.997 < 4, lifted to 4.000


def test_dfma_price_and_table_5_hbm():
    assert {n: round(get_machine(n).dfma_price, 2) for n in ("gb200", "a100", "h100")} == \
        {"gb200": 0.50, "a100": 1.00, "h100": 0.50}
    assert {n: round(capacities(get_machine(n)).per_sm_cycle["dram"], 2) for n in ("gb200", "a100", "h100")} == \
        {"gb200": 25.21, "a100": 10.21, "h100": 9.17}


def test_h200_capacities_are_the_measured_ones():
    h200 = capacities(get_machine("h200"))
    assert h200.per_sm_cycle["dram"] == pytest.approx(4.24e12 / (132 * 1.98e9))  # copy bandwidth
    assert h200.dmma_prices == {"8x8x4": 4.0, "16x8x4": 4.0, "16x8x8": 8.0, "16x8x16": 16.0}
    assert h200.dfma_price == 0.5


def test_every_capacity_has_a_source():
    for machine in load_machines().values():
        assert machine.capacity is not None, machine.name
        report = machine_prices(machine)
        assert set(report["sources"]) == set(report["capacity_per_sm_cycle"]), machine.name
        assert all(text.strip() for text in report["sources"].values())


def test_restricted_sms_scale_dram_only():
    full, cut = capacities(get_machine("h200")), capacities(get_machine("h200"), 66)
    assert cut.sm_count == 66 and cut.full_sm_count == 132 and cut.label == "h200@66"
    assert cut.per_sm_cycle["dram"] == pytest.approx(2 * full.per_sm_cycle["dram"])
    assert {k: v for k, v in cut.per_sm_cycle.items() if k != "dram"} == \
        {k: v for k, v in full.per_sm_cycle.items() if k != "dram"}
    assert full.per_sm_cycle["l2_bytes"] == 64.0  # l2_from = "normalization": the curve is recorded, not priced
    assert cut.clock_hz == full.clock_hz and cut.dmma_prices == full.dmma_prices


def test_prices_command_json(capsys):
    assert main(["model", "prices", "--machine", "h100", "--json"]) == 0
    (report,) = json.loads(capsys.readouterr().out)
    assert [(r["shape"], r["c_tc"]) for r in report["dmma"]] == \
        [("m8n8k4", 4.0), ("m16n8k4", 4.0), ("m16n8k8", 8.0), ("m16n8k16", 16.0)]


def _user_table(tmp_path, text: str):
    file = tmp_path / "machines.toml"
    file.write_text(MACHINES_FILE.read_text() + text)
    return file


NEW_MACHINE = """
[machines.nocap]
description = "a machine without capacities"
arch = "sm_90"
compute_capability = "9.0"
sm_count = 132
boost_clock_ghz = 1.98
memory_gib = 80.0
hbm_bandwidth_nominal_tbs = 3.35
fp64_core_flop_per_sm_cycle = 128.0
fp64_tc_flop_per_sm_cycle = 256.0
source = "test"
"""


def test_machine_without_capacities_is_one_clear_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COMPOSER_MACHINES", str(_user_table(tmp_path, NEW_MACHINE)))
    with pytest.raises(MissingCapacityError, match=r"machine 'nocap' has no capacities per SM cycle"):
        capacities(get_machine("nocap"))
    assert main(["model", "prices", "--machine", "nocap"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nocap" in err[0] and "capacity" in err[0]


def test_a_printed_price_that_disagrees_is_rejected(tmp_path):
    wrong = NEW_MACHINE + '\n[[machines.nocap.dmma]]\nshape = "m8n8k4"\npipe_cycles = 2.0\n'
    with pytest.raises(ConfigError, match=r"nocap.dmma m8n8k4: pipe_cycles 2.0 but max\(4, 512 / 256.0\) = 4.0000"):
        load_machines(_user_table(tmp_path, wrong))
