"""tools/plan_cache.py: the pre-flight check that a pinned sweep plan's CUBINs are in the cache to carry."""

from __future__ import annotations

import json
import sys
from pathlib import Path

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
