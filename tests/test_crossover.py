"""The crossover map and ``path="auto"``: a measured choice on the GPU that measured it, a model's
prediction on a machine never measured, measured before predicted, the choice printed, the
``--paths auto`` expansion, ``composer.tendency(path="auto")`` reaching the chosen path, and
missing or malformed maps as one clear error naming the file and key."""

from __future__ import annotations

import json

import pytest

from composer.campaign.decide import crossover_entries, predicted_choices
from composer.config.crossover import (
    MEASURED,
    PREDICTED,
    Choice,
    CrossoverMap,
    MachineEntry,
    choose,
    crossover_file,
    expand_auto,
    load_crossover,
    resolve_auto,
    write_crossover,
)
from composer.errors import ComposerError, ConfigError


@pytest.fixture(autouse=True)
def _fresh_announcements(monkeypatch):
    """Each test sees the once-per-process printing of an auto choice afresh."""
    from composer.config import crossover

    monkeypatch.setattr(crossover, "_announced", set())


class FakeDevice:
    def __init__(self, name: str = "NVIDIA H200", arch: str = "sm_90", sm_count: int = 132,
                 total_memory: int = 150_109_880_320) -> None:
        self.name, self.arch, self.sm_count, self.total_memory = name, arch, sm_count, total_memory

    def free_memory(self) -> int:
        return self.total_memory


def measured(order: int, path: str, machine: str = "h200") -> Choice:
    return Choice(machine, order, path, MEASURED, "/runs/paths", seconds=4.7e-4, runner_up="FUSED_TC", margin_pct=1.6,
                  metric="device_per_call_s", ranges_overlap=False, resolved=True, criterion="range", rounds=6)


def predicted(order: int, path: str, machine: str = "h200", se: float | None = 1.7) -> Choice:
    return Choice(machine, order, path, PREDICTED, "pred.json", seconds=1e-3, runner_up="GEMM", margin_pct=4.0, se=se,
                  screened=None if se is None else se >= 1)


PREDICTIONS = {
    "schema": "composer.model-predictions", "version": 1,
    "target": {"machine": "gb200", "label": "gb200", "sm_count": 152, "full_sm_count": 152},
    "paths": [{"path": "GEMM", "order": 255, "seconds": 8.0e-4}, {"path": "FUSED_TC", "order": 255, "seconds": 7.0e-4}],
    "fastest": [{"order": 255, "path": "FUSED_TC", "seconds": 7.0e-4, "paths": 2, "se": 2.5, "screened": True}],
}


def test_round_trip_and_the_user_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(tmp_path / "user"))
    assert crossover_file() == tmp_path / "user" / "crossover.toml"
    m = CrossoverMap(str(crossover_file())).with_entry(
        MachineEntry("h200", "NVIDIA H200", "2026-12-02T00:00:00+00:00", {7: measured(7, "FUSED"), 1023: predicted(1023, "GEMM")}))
    write_crossover(m)
    back = load_crossover()
    assert back.machines["h200"].orders == m.machines["h200"].orders
    assert back.machines["h200"].gpu == "NVIDIA H200"
    merged = back.with_entry(MachineEntry("h200", None, "later", {7: measured(7, "FUSED_TC16")}))
    assert merged.machines["h200"].orders[7].path == "FUSED_TC16" and 1023 in merged.machines["h200"].orders


def test_auto_takes_the_measured_choice_on_the_gpu_that_measured_it(capsys):
    m = CrossoverMap("x.toml", {"h200": MachineEntry("h200", "NVIDIA H200", None,
                                                     {7: measured(7, "FUSED"), 63: predicted(63, "FUSED_TC")})})
    choice = resolve_auto(7, FakeDevice(), m)
    assert choice.path == "FUSED" and choice.decided == MEASURED
    line = capsys.readouterr().err.strip()
    assert line == ("auto: p=7 -> FUSED (measured on NVIDIA H200: 1.6 % ahead of FUSED_TC, min-max ranges do not "
                    "overlap, resolved (range); /runs/paths)")
    resolve_auto(7, FakeDevice(), m)
    assert capsys.readouterr().err == ""  # printed once per order
    assert choose(m, 63, FakeDevice()).decided == PREDICTED  # nothing measured at p = 63: the prediction


def test_auto_on_a_machine_never_measured_takes_the_prediction(tmp_path, capsys):
    file = tmp_path / "pred.json"
    file.write_text(json.dumps(PREDICTIONS))
    entries = crossover_entries(tmp_path / "no-campaign", "h200", None, [file])
    assert [e.name for e in entries] == ["gb200"] and entries[0].gpu is None
    m = CrossoverMap(str(tmp_path / "c.toml"))
    for e in entries:
        m = m.with_entry(e)
    write_crossover(m)
    gb200 = FakeDevice("NVIDIA GB200", "sm_100", 152, 185 * 2**30)  # identified by arch, SMs and memory
    choice = resolve_auto(255, gb200, load_crossover(tmp_path / "c.toml"))
    assert choice.path == "FUSED_TC" and choice.decided == PREDICTED and choice.se == 2.5
    assert choice.margin_pct == pytest.approx(100 * (8 / 7 - 1))
    assert "predicted on NVIDIA GB200" in capsys.readouterr().err and "S/E 2.50 screened in" in choice.describe()
    with pytest.raises(ComposerError, match="no choice for p=255 on NVIDIA H200"):
        resolve_auto(255, FakeDevice(), load_crossover(tmp_path / "c.toml"))


def test_measured_before_predicted_and_restricted_predictions_ignored():
    m = CrossoverMap("x.toml", {
        "h200": MachineEntry("h200", None, None, {255: predicted(255, "GEMM")}),
        "lab": MachineEntry("lab", "NVIDIA H200", None, {255: measured(255, "FUSED_TC16", "lab")})})
    assert choose(m, 255, FakeDevice()).path == "FUSED_TC16"
    restricted = {**PREDICTIONS, "target": {**PREDICTIONS["target"], "label": "gb200@76", "sm_count": 76}}
    assert predicted_choices(restricted, "p.json") == ("gb200", {})


def test_expand_auto_for_bench(capsys):
    m = CrossoverMap("x.toml", {"h200": MachineEntry("h200", "NVIDIA H200", None,
                                                     {7: measured(7, "FUSED"), 255: measured(255, "FUSED_TC16")})})
    paths, cells = expand_auto(["GEMM", "auto"], [7, 255], FakeDevice(), m)
    assert paths == ["GEMM", "FUSED", "FUSED_TC16"]
    assert cells == {("GEMM", 7), ("GEMM", 255), ("FUSED", 7), ("FUSED_TC16", 255)}
    assert expand_auto(["GEMM"], [7], FakeDevice(), m) == (["GEMM"], None)
    assert capsys.readouterr().err.count("auto: p=") == 2


def test_tendency_auto_reaches_the_chosen_path(tmp_path, monkeypatch):
    import composer
    from composer import dg
    from composer.paths import problem

    monkeypatch.setenv("COMPOSER_SCHEDULES", str(tmp_path))
    write_crossover(CrossoverMap(str(crossover_file())).with_entry(
        MachineEntry("h200", "NVIDIA H200", None, {7: measured(7, "FUSED_TC16")})))
    reached = []

    class Reached(Exception):
        pass

    def check_fits(order, grid, path, device, options=None):
        reached.append(path)
        raise Reached

    monkeypatch.setattr(problem, "check_fits", check_fits)
    fields = dg.make_fields(7, (1, 1, 1))
    with pytest.raises(Reached):
        composer.tendency(fields, 7, (1, 1, 1), path="auto", device=FakeDevice())
    assert reached == ["FUSED_TC16"]


def test_missing_map_is_one_clear_error(tmp_path, monkeypatch):
    import composer
    from composer import dg

    from composer.config import crossover

    monkeypatch.setenv("COMPOSER_SCHEDULES", str(tmp_path / "none"))
    monkeypatch.setattr(crossover, "packaged_crossover_file", lambda: tmp_path / "no-shipped-map.toml")
    with pytest.raises(ComposerError, match="needs a crossover map.*does not exist.*composer campaign"):
        composer.tendency(dg.make_fields(7, (1, 1, 1)), 7, (1, 1, 1), path="AUTO", device=FakeDevice())
    # with the shipped map, a GPU it does not know still gets the one line
    monkeypatch.undo()
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(tmp_path / "none"))
    with pytest.raises(ComposerError, match="has no choice for p=7 on NVIDIA X1.*composer campaign"):
        composer.tendency(dg.make_fields(7, (1, 1, 1)), 7, (1, 1, 1), path="AUTO",
                          device=FakeDevice("NVIDIA X1", "sm_89", 76, 24 * 2**30))


@pytest.mark.parametrize("body, where", [
    ('schema = 1\n[machines.h200.orders.511]\npath = "FUSED"\ndecided = "measured"\nmetric = "device_per_call_s"\n'
     'source = "x"\n', "machines.h200.orders.511.path"),  # FUSED does not implement p = 511
    ('schema = 1\n[machines.h200.orders.7]\npath = "FUSED"\ndecided = "guessed"\nsource = "x"\n',
     "machines.h200.orders.7.decided"),
    ('schema = 1\n[machines.h200.orders.7]\npath = "FUSED"\ndecided = "predicted"\nsource = "x"\nspeed = 3\n',
     "machines.h200.orders.7.speed"),
    ('schema = 1\n[machines.h200.orders.7]\npath = "FUSED"\ndecided = "measured"\nsource = "x"\n',
     "machines.h200.orders.7.metric"),
    ('schema = 1\n[machines.h200.orders.seven]\npath = "FUSED"\n', "machines.h200.orders.seven"),
    ('schema = 2\n', "schema"),
    ('schema = 1\n[machines.h200.orders.7]\npath = "NOPE"\ndecided = "predicted"\nsource = "x"\n',
     "machines.h200.orders.7.path"),
    ('schema = 1\n[machines.h200\n', "TOML syntax error"),
])
def test_bad_map_names_file_and_key(tmp_path, body, where):
    file = tmp_path / "crossover.toml"
    file.write_text(body)
    with pytest.raises(ConfigError) as info:
        load_crossover(file)
    message = str(info.value)
    assert message.startswith(str(file)) and where in message


def test_bad_map_reaches_auto_as_the_config_error(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(tmp_path))
    crossover_file().write_text("schema = 1\nmachines = 3\n")
    with pytest.raises(ConfigError, match=r"crossover.toml: machines: expected a table"):
        expand_auto(["auto"], [7], FakeDevice())
