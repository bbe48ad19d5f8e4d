"""The shipped crossover map (schedules/crossover.toml): what `path="auto"` answers before any
campaign has run here. It must be what the command below writes from docs/data and the shipped
model predictions, and a user's own map must win over it."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from composer.config import crossover as cx
from composer.config.crossover import load_crossover

ROOT = Path(__file__).resolve().parents[1]
#: The command that wrote schedules/crossover.toml (run from the repository root); docs/schedules.md cites it.
COMMAND = ("campaign --write-crossover --out docs/data "  # docs/data/report-exclude.txt applies
           "--predictions docs/data/h200_s9/model/machines/predict_gb200.json "
           "--predictions docs/data/h200_s9/model/machines/predict_h100.json "
           "--predictions docs/data/h200_s9/model/machines/predict_a100.json "
           "--predictions docs/data/h200_s9/model/machines/predict_a100_p15.json "
           "--predictions docs/data/h100_s24/predictions/predict_h100_sxm.json --crossover schedules/crossover.toml")


class H200:
    name, arch, sm_count, total_memory = "NVIDIA H200", "sm_90", 132, 150754820096


def _choices(m):
    return {(name, order): (c.path, c.decided, c.source, c.runner_up, round(c.seconds or 0.0, 12))
            for name, e in m.machines.items() for order, c in e.orders.items()}


def test_shipped_map_is_what_its_command_writes(tmp_path, monkeypatch):
    from composer.cli.main import main

    monkeypatch.chdir(ROOT)
    argv = shlex.split(COMMAND)
    argv[argv.index("--crossover") + 1] = str(tmp_path / "crossover.toml")
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(tmp_path / "user"))
    assert main(argv) == 0
    fresh, shipped = load_crossover(tmp_path / "crossover.toml"), load_crossover(ROOT / "schedules" / "crossover.toml")
    assert _choices(fresh) == _choices(shipped), "schedules/crossover.toml is stale: rerun the command in this test"
    assert {n: e.gpu for n, e in fresh.machines.items()} == {n: e.gpu for n, e in shipped.machines.items()}


def test_auto_without_a_user_map_answers_from_the_shipped_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(tmp_path / "none"))
    monkeypatch.setattr(cx, "_announced", set())
    chosen = cx.resolve_auto(7, H200())
    shipped = load_crossover(ROOT / "schedules" / "crossover.toml")
    assert chosen.path == shipped.machines["h200"].orders[7].path and chosen.decided == "measured"
    assert "auto: p=7 -> " in capsys.readouterr().err


def test_a_user_map_wins_where_it_has_a_choice(tmp_path, monkeypatch):
    from composer.config.crossover import Choice, CrossoverMap, MachineEntry, write_crossover

    user = tmp_path / "user"
    user.mkdir()
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(user))
    mine = CrossoverMap(str(user / "crossover.toml")).with_entry(MachineEntry("h200", "NVIDIA H200", "now", {
        7: Choice(machine="h200", order=7, path="FUSED_TC16", decided="measured", source="mine", seconds=1e-3,
                  metric="device_per_call_s")}))
    write_crossover(mine)
    assert cx.resolve_auto(7, H200(), announce=False).path == "FUSED_TC16"
    shipped = load_crossover(ROOT / "schedules" / "crossover.toml")
    assert cx.resolve_auto(255, H200(), announce=False).path == shipped.machines["h200"].orders[255].path


def test_a_malformed_user_map_is_still_an_error(tmp_path, monkeypatch):
    from composer.config.fields import ConfigError

    user = tmp_path / "user"
    user.mkdir()
    (user / "crossover.toml").write_text("schema = 99\n")
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(user))
    with pytest.raises(ConfigError, match="schema"):
        cx.resolve_auto(7, H200(), announce=False)


def test_a_user_prediction_does_not_override_a_shipped_measurement(tmp_path, monkeypatch):
    from composer.config.crossover import Choice, CrossoverMap, MachineEntry, write_crossover

    user = tmp_path / "user"
    user.mkdir()
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(user))
    mine = CrossoverMap(str(user / "crossover.toml")).with_entry(MachineEntry("h200", None, "now", {
        63: Choice(machine="h200", order=63, path="GEMM", decided="predicted", source="p.json", seconds=1e-3),
        1023: Choice(machine="h200", order=1023, path="GEMM_FUSED", decided="predicted", source="p.json",
                     seconds=1e-1)}))
    write_crossover(mine)
    shipped = load_crossover(ROOT / "schedules" / "crossover.toml").machines["h200"].orders
    assert shipped[63].decided == "measured"
    assert cx.resolve_auto(63, H200(), announce=False).path == shipped[63].path
    assert cx.resolve_auto(1023, H200(), announce=False).path == "GEMM_FUSED"  # nothing shipped there
