"""tools/plan_cache.py: the pre-flight check that a pinned sweep plan's CUBINs are in the cache to carry."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.test_fused_cpu import needs_nvrtc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import plan_cache  # noqa: E402


@needs_nvrtc
def test_a_pinned_plan_is_complete_in_its_cache_and_not_in_another(tmp_path, monkeypatch, capsys) -> None:
    from composer.fused import sweep

    monkeypatch.setenv("COMPOSER_CACHE_DIR", str(tmp_path / "filled"))
    plan = sweep.check([31], workers=1, subset="staged", only="^$", pin_nvrtc=True)  # fills the cache
    shipped = [r for rows in plan["31"].values() for r in rows if r["label"] == sweep.SHIPPED]
    assert shipped  # compiled on the GPU machine by the compiler each names, not carried: left out here
    for r in shipped:
        r["ok"] = False
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    args = [str(tmp_path / "plan.json")]
    assert plan_cache.main(args) == 0
    assert "kernels of the pinned tables are in" in capsys.readouterr().out
    monkeypatch.setenv("COMPOSER_CACHE_DIR", str(tmp_path / "empty"))
    assert plan_cache.main(args) == 1
    assert "have no CUBIN in" in capsys.readouterr().err
    assert plan_cache.main([str(tmp_path / "nowhere.json")]) == 2


@needs_nvrtc
def test_fill_compiles_the_shipped_tables_a_call_benches(tmp_path, monkeypatch, capsys) -> None:
    """A checkout that lost `.cache` rebuilds what a call carries: `--fill --orders 7` compiles the p = 7
    tables naming this NVRTC (and only those) into the cache, after which the check passes there."""
    from composer.runtime.nvrtc import nvrtc_version

    here = "{}.{}".format(*nvrtc_version())
    tables = list(plan_cache.schedule_tables([7]))
    assert {path for _, path, _ in tables} == {"FUSED", "FUSED_TC", "FUSED_DFMA", "FUSED_TC16"}
    ours = [cfg for _, _, cfg in tables if cfg.nvrtc == here]
    monkeypatch.setenv("COMPOSER_CACHE_DIR", str(tmp_path / "c"))
    others = [cfg.nvrtc for _, _, cfg in tables if cfg.nvrtc and cfg.nvrtc != here]
    device = ["--device-nvrtc", others[0]] if others else []
    if len(set(others)) > 1:
        pytest.skip("the p = 7 tables name more than one other NVRTC")
    assert plan_cache.main([*device, "--orders", "7"]) == (1 if ours else 0)
    capsys.readouterr()
    assert plan_cache.main([*device, "--orders", "7", "--fill"]) == 0
    assert "kernels of the pinned tables are in" in capsys.readouterr().out
    cubins = list((tmp_path / "c" / "nvrtc").glob("*.cubin"))
    assert len(cubins) == sum(len(plan_cache.kernel_sources(cfg)) for cfg in ours)
    assert plan_cache.main([*device, "--orders", "7"]) == 0
    assert plan_cache.main(["--orders", "7,x"]) == 2
    assert plan_cache.main(["--orders", "3"]) == 2  # no schedule for order 3
    assert plan_cache.main([]) == 2


def test_plan_tables_add_the_dfma_twin_of_each_tc_candidate_only(tmp_path) -> None:
    """`sweep-fused run` times FUSED_DFMA on the fastest FUSED_TC candidate that is neither the base nor the shipped
    table: each such candidate's twin is checked (and filled), the base's and the shipped table's are not."""
    import dataclasses

    from composer.fused.candidates import to_table
    from composer.fused.config import fused_config
    from composer.fused.sweep import SHIPPED

    tc = fused_config("FUSED_TC", 7)
    other = dataclasses.replace(tc, pair_io=not tc.pair_io)
    tc16 = fused_config("FUSED_TC16", 7)
    plan = {"7": {
        "FUSED_TC": [{"label": "base", "ok": True, "table": to_table(tc)},
                     {"label": SHIPPED, "ok": True, "table": to_table(tc)},
                     {"label": "cand", "ok": True, "table": to_table(other)},
                     {"label": "dropped", "ok": False, "table": to_table(other)}],
        "FUSED_TC16": [{"label": "cand16", "ok": True, "table": to_table(tc16)}],
    }}
    rows = {label: cfg for _, label, cfg in plan_cache.plan_tables(plan)}
    assert set(rows) == {"FUSED_TC@base", f"FUSED_TC@{SHIPPED}", "FUSED_TC@cand", "FUSED_DFMA@FUSED_TC@cand",
                         "FUSED_TC16@cand16"}
    assert rows["FUSED_DFMA@FUSED_TC@cand"] == dataclasses.replace(other, variant="FUSED_DFMA", dfma=True)


def test_bad_plans_and_orders_get_one_line_and_exit_2(tmp_path, capsys) -> None:
    (tmp_path / "notjson.json").write_text("nope")
    (tmp_path / "rows.json").write_text(json.dumps({"7": {"FUSED_TC": [{"ok": True}]}}))
    for args in ([str(tmp_path / "notjson.json")], [str(tmp_path / "rows.json")], ["--orders", "9"],
                 ["--orders", "0"], [str(tmp_path / "nowhere.json")]):
        assert plan_cache.main(args) == 2, args
        err = capsys.readouterr().err.strip()
        assert err.startswith(("error:", "usage:")) and "Traceback" not in err, (args, err)
        assert len(err.splitlines()) == 1 or err.startswith("usage:"), err


@needs_nvrtc
def test_json_names_the_missing_kernels(tmp_path, monkeypatch, capsys) -> None:
    from composer.runtime.nvrtc import nvrtc_version

    here = "{}.{}".format(*nvrtc_version())
    if not any(cfg.nvrtc == here for _, _, cfg in plan_cache.schedule_tables([7])):
        pytest.skip("no p = 7 table names this NVRTC")
    monkeypatch.setenv("COMPOSER_CACHE_DIR", str(tmp_path / "empty"))
    assert plan_cache.main(["--orders", "7", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["missing"] and report["checked"] >= len(report["missing"])
    assert all(line.startswith("7 ") and f"(NVRTC {here})" in line for line in report["missing"]
               if here in line)
