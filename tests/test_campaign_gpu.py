"""A short campaign end to end on the GPU (two orders, two paths): the real bench and graph
commands in-process, the journal, the crossover map, ``path="auto"`` through it, and the report
of the campaign directory."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.gpu


def test_short_campaign_end_to_end(tmp_path, monkeypatch, capsys):
    from composer import dg
    from composer.api import tendency
    from composer.campaign.journal import DONE, Journal
    from composer.cli.main import main
    from composer.config.crossover import load_crossover
    from composer.runtime import Device
    from composer.validation import relative_max_difference

    monkeypatch.setenv("COMPOSER_SCHEDULES", str(tmp_path / "user"))
    out = tmp_path / "campaign"
    argv = ["campaign", "--out", str(out), "--orders", "7,15", "--paths", "GEMM,FUSED_TC16", "--axes", "paths,overlap",
            "--rounds", "2"]
    assert main(argv) == 0
    journal = Journal.open(out)
    assert {journal.status(s) for s in ("paths/p0007", "paths/p0015", "overlap/p0007", "overlap/p0015")} == {DONE}
    assert json.loads((out / "graph" / "p0015.json").read_text())["order"] == 15
    device = Device()
    choices = load_crossover().machines
    entry = next(e for e in choices.values() if e.gpu == device.name)
    assert set(entry.orders) == {7, 15} and all(c.decided == "measured" for c in entry.orders.values())
    assert main(argv) == 0  # resumed: nothing left to do
    assert "0:00:00" in capsys.readouterr().out

    fields = dg.make_fields(7, (2, 1, 1), varying=True)
    result = tendency(fields, 7, (2, 1, 1), path="auto", device=device)
    assert relative_max_difference(result, dg.reference_tendency(fields, 7, (2, 1, 1))) <= 1e-12
    assert f"auto: p=7 -> {entry.orders[7].path}" in capsys.readouterr().err

    pytest.importorskip("matplotlib")
    from composer.report import build_report

    report = build_report([out], tmp_path / "report")
    assert {"landscape", "overlap"} <= {s.id for s in report.sections}
