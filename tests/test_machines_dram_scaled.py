"""dram_from = "scaled": the DRAM capacity as the datasheet HBM bandwidth times dram_scale (an assumed copy
bandwidth for a machine not measured yet), validated on load; the shipped h100_sxm entry uses it."""

import pytest

from composer.arch.machines import get_machine, load_machines
from composer.errors import ConfigError
from composer.model.capacity import capacities
from tests.test_config import NEW_MACHINE

TOY = NEW_MACHINE + """
[machines.toy.capacity]
dram_from = "scaled"
dram_scale = 0.5
lsu_wavefronts = 1.0
issue = 4.0
alu = 2.0
l2_bytes = 64.0
fma = 4.0

[machines.toy.capacity.source]
fp64 = "t"
dram = "t"
dram_scale = "t"
lsu_wavefronts = "t"
issue = "t"
alu = "t"
l2_bytes = "t"
fma = "t"
"""


def _load(tmp_path, text):
    user = tmp_path / "mine.toml"
    user.write_text(text)
    return load_machines(user)


def test_scaled_dram_is_the_datasheet_times_the_scale(tmp_path):
    toy = _load(tmp_path, TOY)["toy"]
    # 1 TB/s over 10 SMs x 1 GHz = 100 B per SM cycle nominal; half of it
    assert toy.hbm_bytes_per_sm_cycle == pytest.approx(100.0)
    assert toy.dram_bytes_per_sm_cycle == pytest.approx(50.0)
    assert capacities(toy).per_sm_cycle["dram"] == pytest.approx(50.0)
    assert capacities(toy, sms=6).per_sm_cycle["dram"] == pytest.approx(50.0 * 10 / 6)
    assert toy.capacity.source["dram_scale"] == "t"


@pytest.mark.parametrize(
    "text, fragment",
    [
        (TOY.replace("dram_scale = 0.5\n", ""), "needs dram_scale"),
        (TOY.replace('dram_from = "scaled"', 'dram_from = "nominal"'), "only with dram_from = 'scaled'"),
        (TOY.replace("dram_scale = 0.5", "dram_scale = 1.2"), "(0, 1]"),
        (TOY.replace("dram_scale = 0.5", "dram_scale = 0.0"), "dram_scale"),
        (TOY.replace('dram_scale = "t"\n', ""), "capacity.source.dram_scale"),
        (TOY.replace('dram_from = "scaled"', 'dram_from = "guessed"'), "dram_from"),
    ],
)
def test_scaled_dram_is_validated(tmp_path, text, fragment):
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, text)
    assert fragment in str(err.value)


def test_shipped_h100_sxm_entry():
    m = get_machine("h100_sxm")
    assert (m.sm_count, m.boost_clock_ghz, m.hbm_bandwidth_nominal_tbs, m.l2_mib) == (132, 1.98, 3.35, 50.0)
    assert m.capacity.dram_from == "scaled"
    # the H200's measured/datasheet copy ratio carried over: 3.35 x 4.24 / 4.8 TB/s
    h200 = get_machine("h200")
    ratio = h200.hbm_bandwidth_measured_tbs / h200.hbm_bandwidth_nominal_tbs
    assert m.capacity.dram_scale == pytest.approx(ratio, abs=1e-4)
    assert m.dram_bytes_per_sm_cycle == pytest.approx(3.35e12 * ratio / (132 * 1.98e9), rel=1e-4)
    # the same GH100 SM as the H200 entry: per-SM-cycle FP64 rates, DMMA prices and the other capacities
    assert capacities(m).dmma_prices == capacities(h200).dmma_prices
    assert capacities(m).dfma_price == capacities(h200).dfma_price
    for key in ("lsu_wavefronts", "issue", "alu", "fma", "l2_bytes"):
        assert capacities(m).per_sm_cycle[key] == capacities(h200).per_sm_cycle[key]
    # the paper's TSUBAME H100 entry stays as it was
    assert get_machine("h100").hbm_bandwidth_nominal_tbs == 2.396


def test_the_device_tools_h100_is_identified_as_h100_sxm():
    """What the device tool's H100 reported (81559 MiB, 132 SMs, sm_90) picks this entry, not the paper's 94-GB
    TSUBAME board, so that `path="auto"` reads its crossover choices; the H200 stays the H200."""
    from composer.arch.identify import identify_machine

    assert identify_machine("sm_90", 132, 81559 * 2**20).name == "h100_sxm"
    assert identify_machine("sm_90", 132, 150754820096).name == "h200"
