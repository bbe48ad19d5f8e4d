"""The --sms options of bench and profile on the CPU: what they add to the ncu command and the
results directory guard (a directory holds runs at one SM count)."""

from __future__ import annotations

import json
from pathlib import Path

from composer.cli.main import main
from composer.model.counters import QUANTITIES, REQUESTED_METRICS
from composer.profile.ncu import ncu_command


def test_profile_requests_every_metric_the_model_reads():
    cmd = ncu_command("/x/ncu", ["SpeedOfLight"], Path("/tmp/l.csv"), ["python3", "-m", "t"], REQUESTED_METRICS)
    requested = cmd[cmd.index("--metrics") + 1].split(",")
    assert {q.metric for q in QUANTITIES} <= set(requested)
    assert "sm__pipe_shared_cycles_active.sum" in requested and cmd[-3:] == ["python3", "-m", "t"]


def test_bench_refuses_to_mix_sm_counts_in_one_directory(tmp_path, capsys):
    out = tmp_path / "bench"
    out.mkdir()
    (out / "provenance.json").write_text(json.dumps({"sessions": [{"plan": {"paths": ["FUSED"], "sms": None}}]}))
    assert main(["bench", "--sms", "66", "--paths", "FUSED", "--orders", "7", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds runs at all SMs, not 66" in err[0]
