"""composer.fileio.emit_json: the measuring tools' output on stdout and in --out, and a reader that
closes the pipe early (`| head`) ends the print quietly."""

from __future__ import annotations

import json
import subprocess
import sys

from composer.fileio import emit_json


def test_emit_json_prints_and_writes_the_same_document(tmp_path, capsys) -> None:
    document = {"shape": "16x8x8", "latency_cycles": 64.0, "points": [1, 2, 3]}
    emit_json(document, tmp_path / "out.json")
    assert json.loads(capsys.readouterr().out) == document
    assert json.loads((tmp_path / "out.json").read_text()) == document
    assert not list(tmp_path.glob("*.tmp*"))  # written atomically: no temporary left behind


def test_emit_json_survives_a_closed_pipe() -> None:
    script = "from composer.fileio import emit_json; emit_json({'n': list(range(200000))})"
    run = subprocess.run(f"{sys.executable} -c \"{script}\" | head -n 2", shell=True, capture_output=True, text=True)
    assert run.stdout.splitlines() == ["{", '  "n": [']
    assert "Error" not in run.stderr, run.stderr
