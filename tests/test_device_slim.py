"""tools/device_slim.sh: the data directories leave the index (not the disk) and come back exactly."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "device_slim.sh"


def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=repo, check=check, capture_output=True, text=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.email", "t@example.com")
    _git(tmp_path, "config", "user.name", "t")
    for d in ("docs/data/h200_s3", "docs/data/h200_s24", "docs/report", "composer"):
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / "f.json").write_text("x" * 1000)
    (tmp_path / "docs/data/bandwidth.json").write_text("{}")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "init")
    return tmp_path


def _run(repo: Path, cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(TOOL), cmd], cwd=repo, capture_output=True, text=True)


def test_on_untracks_old_data_keeps_newest_and_blocks_commits(repo: Path) -> None:
    assert _run(repo, "on").returncode == 0
    tracked = set(_git(repo, "ls-files").stdout.split())
    assert tracked == {"composer/f.json", "docs/data/h200_s24/f.json", "docs/data/bandwidth.json"}
    assert (repo / "docs/data/h200_s3/f.json").exists()  # only the index changed
    assert _git(repo, "status", "--porcelain").stdout.count("??") == 0  # ignored, so they do not travel
    assert _git(repo, "commit", "-qm", "bad", "--allow-empty", check=False).returncode != 0
    assert _run(repo, "off").returncode == 0
    assert _git(repo, "status", "--porcelain").stdout == ""
    assert "docs/data/h200_s3/f.json" in _git(repo, "ls-files").stdout
    assert _git(repo, "commit", "-qm", "ok", "--allow-empty", check=False).returncode == 0


def test_on_refuses_staged_changes_and_unknown_command(repo: Path) -> None:
    (repo / "composer/g.py").write_text("pass\n")
    _git(repo, "add", "composer/g.py")
    r = _run(repo, "on")
    assert r.returncode == 2 and "staged" in r.stderr
    r = _run(repo, "sideways")
    assert r.returncode == 2 and "unknown command" in r.stderr
