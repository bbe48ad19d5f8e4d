"""composer sweep-fused on the CPU: check writes a plan of compiled candidates, apply writes the
measured winners, run refuses without a GPU, bad input is a clear error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from composer.cli.main import main
from composer.config.schedules import load_schedule_file, packaged_dir
from composer.errors import ComposerError
from composer.fused.candidates import candidate_list, to_table
from composer.runtime import gpu_available


def test_check_writes_a_plan_of_compiled_candidates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COMPOSER_CACHE_DIR", str(tmp_path / "cache"))
    plan_file = tmp_path / "plan.json"
    assert main(["sweep-fused", "check", "--orders", "7", "--subset", "traces", "--plan", str(plan_file)]) == 0
    plan = json.loads(plan_file.read_text())
    assert set(plan) == {"7"} and set(plan["7"]) == {"FUSED", "FUSED_TC", "FUSED_TC16"}
    for variant, rows in plan["7"].items():
        assert [r["label"] for r in rows] == [n for n, _ in candidate_list(variant, 7, "traces")]
        assert rows[0]["label"] == "base" and all(r["kernels"] for r in rows)
    assert "candidates kept" in capsys.readouterr().out
    assert any((tmp_path / "cache").rglob("*.cubin"))  # the NVRTC cache a device call can carry


def test_check_json_only_and_spill_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """--json prints the plan's summary; --only keeps the matching labels and the base; --max-spill 0
    drops every candidate that spills (the base is kept: the run times against it)."""
    monkeypatch.setenv("COMPOSER_CACHE_DIR", str(tmp_path / "cache"))
    plan_file = tmp_path / "plan.json"
    args = ["sweep-fused", "check", "--orders", "7", "--subset", "traces,strip", "--plan", str(plan_file)]
    assert main([*args, "--only", "epb2", "--max-spill", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    plan = json.loads(plan_file.read_text())
    assert out["plan"] == str(plan_file) and out["kept"] == sum(r["ok"] for v in plan["7"].values() for r in v)
    for variant, rows in plan["7"].items():
        labels = [r["label"] for r in rows]
        everything = [n for n, _ in candidate_list(variant, 7, "traces,strip")]
        assert labels == [n for n in everything if n == "base" or "epb2" in n] and len(labels) < len(everything)
        assert labels[0] == "base" and len(labels) > 1 and all("epb2" in name for name in labels[1:])
        assert all(not r["ok"] for r in rows[1:] if any(k[1] for k in r["kernels"]))
        assert [e["label"] for e in out["orders"]["7"][variant]] == labels


def test_apply_writes_winners_into_a_schedules_directory(tmp_path: Path) -> None:
    schedules = tmp_path / "schedules"
    schedules.mkdir()
    shutil.copy(Path(str(packaged_dir())) / "p0015.toml", schedules / "p0015.toml")
    (name, cfg), = [c for c in candidate_list("FUSED", 15, "strip")][1:2]
    base = candidate_list("FUSED", 15, "strip")[0][1]
    records = [
        {"variant": "FUSED@base", "order": 15, "passed": True, "us_per_call": 600.0, "table": to_table(base)},
        {"variant": f"FUSED@{name}", "order": 15, "passed": True, "us_per_call": 500.0, "table": to_table(cfg)},
    ]
    (tmp_path / "sweep.json").write_text(json.dumps(records))
    assert main(["sweep-fused", "apply", str(tmp_path / "sweep.json"), "--schedules", str(schedules),
                 "--date", "2026-01-02"]) == 0
    text = (schedules / "p0015.toml").read_text()
    assert "H200 2026-01-02, composer.fused.sweep: 500.0 us/call (previous schedule 600.0)" in text
    assert load_schedule_file(schedules / "p0015.toml").paths["FUSED"]["elements_per_block"] == \
        cfg.elements_per_block
    # a gain below --min-gain changes nothing
    before = text
    assert main(["sweep-fused", "apply", str(tmp_path / "sweep.json"), "--schedules", str(schedules),
                 "--min-gain", "0.5"]) == 0
    assert (schedules / "p0015.toml").read_text() == before


def test_bad_input_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep-fused", "check", "--orders", "7", "--subset", "nope"]) == 2
    assert "unknown subset" in capsys.readouterr().err
    assert main(["sweep-fused", "apply", str(tmp_path / "missing.json")]) == 2
    assert "no such sweep log" in capsys.readouterr().err
    if not gpu_available():
        assert main(["sweep-fused", "run", "--orders", "7", "--plan", str(tmp_path / "p.json"),
                     "--out", str(tmp_path / "o")]) == 2
        assert "GPU" in capsys.readouterr().err


def test_run_parses_the_plan_writes_each_record_and_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The device loop of `sweep-fused run`, with the GPU trial replaced: candidates come from the
    plan's own tables (any family, here stream_lines), sweep.json is rewritten after every record,
    FUSED_DFMA follows the fastest FUSED_TC candidate, and a rerun skips what the file holds."""
    import composer.fused.sweep as sweep
    import composer.fused.trial as trial
    import composer.runtime as runtime

    plan = {"511": {v: [{"label": n, "ok": True, "table": to_table(c)}
                        for n, c in candidate_list(v, 511, "stream_lines")[:3]]
                    for v in ("FUSED_TC", "FUSED_TC16")}}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    calls: list[str] = []

    def fake_case(order, grid, variants, device, timing_calls=0, extra=None, on_start=None, on_record=None,
                  stage_dt=None):
        recs = []
        for label in list(variants) + list(extra or {}):
            config = extra[label](order) if extra and label in extra else None
            assert config is None or config.order == order
            on_start(label)
            calls.append(label)
            rec = {"variant": label, "order": order, "passed": True, "rel_err": 1e-14,
                   "us_per_call": 100.0 + len(calls) if "@base" not in label else 500.0}
            if len(calls) == 3:  # the file must already hold the records before this one
                assert len(json.loads((tmp_path / "out" / "sweep.json").read_text())) == 2
            on_record(rec)
            recs.append(rec)
        return recs

    monkeypatch.setattr(trial, "run_case", fake_case)
    monkeypatch.setattr(runtime, "default_device", lambda: None)
    monkeypatch.setattr(sweep, "prebuild", lambda configs: None)
    sweep.run(str(tmp_path / "out"), [511], 1e9, str(tmp_path / "plan.json"))
    log = json.loads((tmp_path / "out" / "sweep.json").read_text())
    labels = [r["variant"] for r in log]
    assert labels[0] == "FUSED_DFMA" and len(labels) == 1 + 6 + 1
    fastest_tc = min((r for r in log if r["variant"].startswith("FUSED_TC@")), key=lambda r: r["us_per_call"])
    assert labels[-1] == f"FUSED_DFMA@{fastest_tc['variant']}" and "@base" not in fastest_tc["variant"]
    assert all(r["table"] for r in log[1:-1])  # the candidates' tables, for `apply`
    assert '"order": 511' in capsys.readouterr().out
    with pytest.raises(ComposerError, match="no candidates for order 255"):
        sweep.run(str(tmp_path / "out"), [511, 255], 1e9, str(tmp_path / "plan.json"))
    calls.clear()
    sweep.run(str(tmp_path / "out"), [511], 1e9, str(tmp_path / "plan.json"))  # resume: nothing left
    assert calls == [] and len(json.loads((tmp_path / "out" / "sweep.json").read_text())) == len(log)


def test_stage_timing_passes_the_schedule_time_step_and_a_log_keeps_one_timing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`run --timing stages` hands each trial the schedule's RK time step (the trial then runs the RK
    update between timed calls); a log timed one way refuses to be resumed the other way, since `apply`
    compares every candidate with the base of the same log."""
    import composer.fused.sweep as sweep
    import composer.fused.trial as trial
    import composer.runtime as runtime
    from composer.config.schedules import load_schedule
    from composer.fused.candidates import descending_candidates

    plan = {"31": {"FUSED_TC": [{"label": n, "ok": True, "table": to_table(c)}
                                for n, c in [("base", candidate_list("FUSED_TC", 31, "descending")[0][1]),
                                             *descending_candidates("FUSED_TC", 31)[:1]]]}}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    seen: list = []

    def fake_case(order, grid, variants, device, timing_calls=0, extra=None, on_start=None, on_record=None,
                  stage_dt=None):
        seen.append(stage_dt)
        for label in list(variants) + list(extra or {}):
            on_start(label)
            on_record({"variant": label, "order": order, "passed": True, "rel_err": 0.0, "us_per_call": 600.0,
                       "timing": "calls" if stage_dt is None else "stages"})
        return []

    monkeypatch.setattr(trial, "run_case", fake_case)
    monkeypatch.setattr(runtime, "default_device", lambda: None)
    monkeypatch.setattr(sweep, "prebuild", lambda configs: None)
    sweep.run(str(tmp_path / "out"), [31], 1e9, str(tmp_path / "plan.json"), timing="stages")
    assert seen and all(dt == load_schedule(31).benchmark.dt for dt in seen)
    with pytest.raises(ComposerError, match="--timing stages"):
        sweep.run(str(tmp_path / "out"), [31], 1e9, str(tmp_path / "plan.json"), timing="calls")
    with pytest.raises(ComposerError, match="expected one of calls, stages"):
        sweep.run(str(tmp_path / "other"), [31], 1e9, str(tmp_path / "plan.json"), timing="bogus")
    assert main(["sweep-fused", "run", "--orders", "31", "--plan", "p.json", "--out", "o", "--timing", "bogus"]) == 2
