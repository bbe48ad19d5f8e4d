"""composer profile on the CPU: ncu discovery errors, the command line, raw-CSV parsing, binding."""

from __future__ import annotations

import shutil

import pytest

from composer.cli.main import main
from composer.errors import ComposerError
from composer.profile import ncu as ncu_mod
from composer.profile.ncu import available_sections, ncu_command, parse_raw_csv, summarize

HEADER = ['ID', 'Process ID', 'Kernel Name', 'Block Size', 'Grid Size', 'gpu__time_duration.sum',
          'dram__bytes_read.sum', 'dram__bytes_write.sum',
          'dram__throughput.avg.pct_of_peak_sustained_elapsed',
          'lts__throughput.avg.pct_of_peak_sustained_elapsed',
          'l1tex__throughput.avg.pct_of_peak_sustained_active',
          'sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active',
          'sm__pipe_tensor_op_dmma_cycles_active.avg.pct_of_peak_sustained_active',
          'smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio',
          'smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio',
          'launch__registers_per_thread', 'sm__warps_active.avg.pct_of_peak_sustained_active',
          'smsp__inst_executed.sum', 'gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed',
          'lts__t_sectors.avg.pct_of_peak_sustained_elapsed']


def _csv(rows: list[list[str]]) -> str:
    def line(vals: list[str]) -> str:
        return ",".join(f'"{v}"' for v in vals)
    units = ["", "", "", "", "", "nsecond", "byte", "byte", "%", "%", "%", "%", "%", "", "", "register/thread", "%",
             "inst", "%", "%"]
    return "\n".join(["==PROF== Connected to process 1", line(HEADER), line(units), *map(line, rows)]) + "\n"


def test_parse_and_summarize_memory_bound_kernel() -> None:
    text = _csv([["0", "1", "fused_volume_p7", "(128, 1, 1)", "(32768, 1, 1)", "400,000", "1600000000",
                  "200000000", "88.5", "40", "55", "20", "0", "3.5", "0.5", "96", "60.2", "1,234,567", "70", "30"]])
    rows = parse_raw_csv(text)
    assert len(rows) == 1
    k = summarize(rows[0])
    assert k.duration_us == pytest.approx(400.0)
    assert k.dram_bytes == pytest.approx(1.8e9)
    assert k.dram_tbps == pytest.approx(1.8e9 / 400e-6 / 1e12)
    assert k.registers == 96 and k.occupancy_achieved_pct == pytest.approx(60.2)
    assert k.instructions == 1234567 and k.shared_wavefronts is None
    assert k.units_pct["DRAM"] == pytest.approx(88.5)  # dram__throughput preferred over gpu__dram_throughput
    assert k.units_pct["L2 sectors"] == pytest.approx(30.0)
    assert k.binding.startswith("DRAM (88")  # not the L2 aggregate: its sectors run at 30 %
    assert list(k.stalls) == ["long_scoreboard", "barrier"]
    assert k.pipes_pct == {"fp64": 20.0, "tensor_op_dmma": 0.0}


def test_latency_bound_names_top_stall() -> None:
    text = _csv([["0", "1", "k", "(256, 1, 1)", "(64, 1, 1)", "1000", "1", "1", "30", "20", "45", "10", "35",
                  "1.0", "7.5", "194", "12", "10", "", ""]])
    k = summarize(parse_raw_csv(text)[0])
    assert k.binding == "latency (busiest: L1/shared 45 %; top stall: barrier)"


def test_no_table_is_a_clear_error() -> None:
    with pytest.raises(ComposerError, match="no ncu CSV table"):
        parse_raw_csv("==PROF== Connected\n==PROF== Disconnected\n")


def test_section_listing_and_command() -> None:
    listing = ("Identifier                      Display Name       Filename\n"
               "------------------------------  -----------------  ----------\n"
               "SpeedOfLight                    GPU Speed Of Light  SpeedOfLight.section\n"
               "WarpStateStats                  Warp State Stats    WarpStateStats.section\n")
    assert {"SpeedOfLight", "WarpStateStats"} <= available_sections(listing)
    cmd = ncu_command("/x/ncu", ["SpeedOfLight"], __import__("pathlib").Path("/tmp/l.csv"), ["python3", "-m", "t"])
    assert cmd[:1] == ["/x/ncu"] and "--profile-from-start" in cmd and cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[-3:] == ["python3", "-m", "t"]
    assert "--replay-mode" not in cmd
    replayed = ncu_command("/x/ncu", ["SpeedOfLight"], __import__("pathlib").Path("/tmp/l.csv"), ["t"],
                           replay="application")
    assert replayed[replayed.index("--replay-mode") + 1] == "application" and replayed[-1] == "t"
    with pytest.raises(ValueError, match="replay mode 'range'"):
        ncu_command("/x/ncu", [], __import__("pathlib").Path("/tmp/l.csv"), ["t"], replay="range")


def test_failure_text_reads_ncu_messages_from_its_log(tmp_path) -> None:
    """With --log-file ncu writes its own errors into the log (session 7: exit 11 with an empty stderr)."""
    import subprocess

    from composer.cli.profile import _failure_text

    log = tmp_path / "l.csv"
    log.write_text('==PROF== Connected to process 1\n"ID","Kernel"\n==ERROR== The application returned an error code (11).\n')
    proc = subprocess.CompletedProcess(["ncu"], 11, stdout="", stderr="")
    text = _failure_text(proc, log)
    assert "==ERROR== The application returned an error code (11)." in text and '"ID"' not in text
    assert _failure_text(proc, tmp_path / "absent.csv") == "no message from ncu or its target"
    assert "Traceback" in _failure_text(subprocess.CompletedProcess(["ncu"], 1, "", "Traceback: boom\n"), log)


def test_missing_ncu_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CUDA_HOME", "/nonexistent")
    monkeypatch.setattr(ncu_mod, "Path", lambda p: __import__("pathlib").Path("/nonexistent") / str(p).lstrip("/"))
    assert main(["profile", "--paths", "FUSED", "--orders", "7"]) == 2
    assert "ncu" in capsys.readouterr().err


def test_unknown_path_and_order_fail_before_profiling(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "--paths", "NOPE", "--orders", "7"]) == 2
    assert main(["profile", "--paths", "FUSED", "--orders", "6"]) == 2


@pytest.mark.gpu
def test_profile_one_fused_call_on_the_gpu(tmp_path) -> None:
    import json

    try:
        ncu_mod.find_ncu()
    except ComposerError:
        pytest.skip("ncu not installed")
    out = tmp_path / "prof"
    assert main(["profile", "--paths", "FUSED", "--orders", "7", "--grid", "2,2,2", "--out", str(out)]) == 0
    summary = json.loads((out / "profile.json").read_text())
    kernels = summary["FUSED@p7"]["kernels"]
    assert [k["kernel"] for k in kernels] == ["fused_p7_k0_xyz"]  # exactly the profiled call
    assert kernels[0]["duration_us"] > 0 and kernels[0]["binding"]
    # a rerun skips the finished pair
    assert main(["profile", "--paths", "FUSED", "--orders", "7", "--grid", "2,2,2", "--out", str(out)]) == 0


def test_a_target_that_fails_under_kernel_replay_is_retried_with_application_replay(tmp_path, monkeypatch) -> None:
    """Sessions 6 and 7: at p = 63 the profiled process failed under ncu's kernel replay ("The
    application returned an error code (11)"); the profile retries once with application replay and
    records the mode. Any other failure, or an explicit --replay, is not retried."""
    import subprocess

    from rich.console import Console

    from composer.cli import profile as prof
    from composer.errors import ComposerError

    log = tmp_path / "FUSED_TC-p63.csv"
    calls: list[list[str]] = []

    def fake_run(cmd, capture_output, text, timeout, fail_modes=("kernel",)):
        calls.append(cmd)
        mode = cmd[cmd.index("--replay-mode") + 1] if "--replay-mode" in cmd else "kernel"
        if mode in fail_modes:
            log.write_text("==ERROR== The application returned an error code (11).\n")
            return subprocess.CompletedProcess(cmd, 11, "", "")
        log.write_text('"ID","Kernel Name"\n')
        return subprocess.CompletedProcess(cmd, 0, "", "")

    console = Console(file=open(tmp_path / "out.txt", "w"))
    monkeypatch.setattr(prof.subprocess, "run", fake_run)
    proc, mode = prof._run_ncu("/x/ncu", [], log, ["t"], (), None, 10.0, "FUSED_TC@p63", console)
    assert mode == "application" and len(calls) == 2 and "--replay-mode" not in calls[0]
    calls.clear()
    with pytest.raises(ComposerError, match="kernel replay: exit 11"):
        prof._run_ncu("/x/ncu", [], log, ["t"], (), "kernel", 10.0, "FUSED_TC@p63", console)
    assert len(calls) == 1
    monkeypatch.setattr(prof.subprocess, "run",
                        lambda cmd, **kw: fake_run(cmd, **kw, fail_modes=("kernel", "application")))
    with pytest.raises(ComposerError, match="kernel replay: .* \\|\\| application replay: exit 11"):
        prof._run_ncu("/x/ncu", [], log, ["t"], (), None, 10.0, "FUSED_TC@p63", console)


def test_the_l2_fabric_is_named_when_it_binds() -> None:
    """A real H100 profile (session 27, ncu's breakdown of lts__throughput): p = 7's box kernel moves
    DRAM at 89 % of the peak, but the link between the L2 partitions is busier (96 %): that is the binding."""
    from pathlib import Path

    from composer.profile.ncu import UNIT_BREAKDOWNS

    text = (Path(__file__).resolve().parents[1] / "docs/data/h100_s27/call4/brk/tc7.csv").read_text()
    fused = [summarize(r) for r in parse_raw_csv(text) if "fused_tc_p7" in r["Kernel Name"]]
    assert len(fused) == 1
    kernel = fused[0]
    assert kernel.units_pct["L2 fabric"] == pytest.approx(96.36)
    assert kernel.units_pct["L2 tags"] < 70 and kernel.binding == "L2 fabric (96 % of peak)"
    assert kernel.dram_bytes == pytest.approx(1.670765312e9, rel=1e-6)
    # the sub-units are asked for by breakdown, so a GPU without the fabric metric asks nothing it lacks
    cmd = ncu_command("/x/ncu", [], Path("/tmp/l.csv"), ["t"], UNIT_BREAKDOWNS)
    assert "breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed" in cmd[cmd.index("--metrics") + 1]


def test_l2_sector_and_link_bytes_are_read_when_profiled() -> None:
    """The H100 profile of p = 15's shipped FUSED_TC16 kernel (session 27 call 2): the SMs read 1.25x its
    DRAM reads in L2 sectors, and 956 MB crossed the link between the L2 partitions."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs/data/h100_s27/call2/prof/p15/FUSED_TC16-p15.csv").read_text()
    kernel = next(summarize(r) for r in parse_raw_csv(text) if "fused_tc16_p15" in r["Kernel Name"])
    assert kernel.fabric_bytes == pytest.approx(29886386 * 32)
    assert kernel.l2_read_bytes / 1.539857408e9 == pytest.approx(1.25, abs=0.01)
    assert summarize({"Kernel Name": "k"}).fabric_bytes is None  # absent metrics stay absent
