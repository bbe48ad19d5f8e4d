"""tools/gpu_suite.sh runs the GPU tests in parts that each fit one device call: every test file that marks a test
``gpu`` must be in one of its parts, or the suite silently leaves it out (session 40 found
tests/test_fused_side_queues.py missing)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "tools" / "gpu_suite.sh"


def _gpu_test_files() -> set[str]:
    return {p.name for p in (ROOT / "tests").glob("test_*.py") if re.search(r"\bmark\.gpu\b", p.read_text())}


def test_every_gpu_test_file_is_in_a_part_of_the_suite() -> None:
    listed = set(re.findall(r"tests/(test_\w+\.py)", SUITE.read_text()))
    gpu = _gpu_test_files()
    assert gpu, "no GPU test files found: the pattern no longer matches the marks"
    assert sorted(gpu - listed) == [], "GPU test files no part of tools/gpu_suite.sh runs"
    assert sorted(listed - gpu) == [], "files in tools/gpu_suite.sh without a GPU test"


def test_an_unknown_part_is_one_line_and_exit_2() -> None:
    proc = subprocess.run(["bash", str(SUITE), "Z"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "unknown part Z" in proc.stderr
    for part in "ABCDE":  # every part the help names is one the script accepts
        assert f"\n  {part}) " in SUITE.read_text()
