"""``composer info`` and the CLI error contract, in process and as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from composer.cli.main import COMMANDS, main

ROOT = Path(__file__).resolve().parents[1]


def test_info_table(capsys):
    assert main(["info", "--order", "7"]) == 0
    out = capsys.readouterr().out
    for text in ("32x32x32", "805,306,368", "1,476,395,008", "memory bound", "FUSED_TC16", "h200"):
        assert text in out


def test_info_json(capsys):
    assert main(["info", "--order", "1023", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["grid"] == [1, 1, 1] and report["points"] == 1024**3
    assert report["per_call"]["flop"] == 6 * 1024**4
    assert report["roofline"]["bound"] == "compute"
    fits = {row["path"]: row["fits"] for row in report["memory"]}
    assert fits["GEMM"] is False and fits["FUSED_TC"] is True
    assert report["machine"]["name"] == "h200"


def test_info_grid_and_machine(capsys):
    assert main(["info", "--order", "8", "--grid", "2,3,4", "--machine", "a100", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["elements"] == 24 and report["grid_source"] == "--grid"
    assert report["machine"]["hbm_bandwidth_kind"] == "nominal"
    assert main(["info", "--order", "7", "--grid", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["grid"] == [4, 4, 4]


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["info", "--order", "8"], "available orders: 7, 15"),
        (["info", "--order", "7", "--machine", "nope"], "unknown machine"),
        (["info", "--order", "7", "--reserve", "2"], "argument --reserve: expected a fraction in [0, 1)"),
    ],
)
def test_errors_are_one_line(capsys, argv, fragment):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and fragment in err
    assert "Traceback" not in err and err.count("\n") == 1


def test_usage_errors_and_help(capsys):
    assert main(["info", "--order", "7", "--grid", "1,2"]) == 2
    assert main([]) == 2
    assert main(["--help"]) == 0
    assert "info" in capsys.readouterr().out
    assert main(["info", "--help"]) == 0
    assert "--grid" in capsys.readouterr().out
    assert "info" in COMMANDS


def test_subprocess_module_entry():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "composer.cli.main", "info", "--order", "7", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["per_call"]["unique_bytes"] == 1_476_395_008
    bad = subprocess.run(
        [sys.executable, "-m", "composer.cli.main", "info", "--order", "9"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("error: p0009.toml")


def test_info_memory_with_path_options(capsys):
    """``--option PATH.KEY=VALUE`` builds that path's estimate with the option; the table names it."""
    assert main(["info", "--order", "1023", "--option", "GEMM.parity=on", "--option", "GEMM_FUSED.flux=mainloop",
                 "--json"]) == 0
    rows = {row["path"]: row for row in json.loads(capsys.readouterr().out)["memory"]}
    assert rows["GEMM"]["options"] == {"parity": "on"} and rows["GEMM_CUTE"]["options"] == {}
    assert rows["GEMM"]["items"][-1] == {"name": "parity matrices", "count": 2, "bytes_each": 8 * 512 * 512,
                                         "bytes": 2 * 8 * 512 * 512, "note": rows["GEMM"]["items"][-1]["note"]}
    assert rows["GEMM"]["fits"] is False and rows["GEMM_FUSED"]["fits"] is True
    assert rows["GEMM_FUSED"]["total_bytes"] < rows["GEMM_CUTE"]["total_bytes"] - 3 * 8 * 1024**3
    assert main(["info", "--order", "1023", "--option", "GEMM.parity=on"]) == 0
    assert "GEMM parity=on" in capsys.readouterr().out


@pytest.mark.parametrize("option, message", [("GEMM.carrier=z", "path GEMM has no option 'carrier'"),
                                             ("NOPE.parity=on", "unknown path 'NOPE'"),
                                             ("GEMM.parity=maybe", "expected true or false"),
                                             ("GEMM", "expected PATH.KEY=VALUE")])
def test_info_bad_path_option_is_one_line(capsys, option, message):
    try:
        code = main(["info", "--order", "7", "--option", option])
    except SystemExit as stop:  # argparse's own refusal of the form
        code = stop.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
