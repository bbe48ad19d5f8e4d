"""docs/results.md's generated blocks against docs/data: the command at the top of the file,
run again, reproduces the file byte for byte (the document cannot drift from the data); a block
naming no table of the report, or a malformed one, is one line and leaves the file untouched."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from composer.cli.main import main
from composer.report.markdown_blocks import MarkdownBlockError, replace_blocks

ROOT = Path(__file__).resolve().parents[1]
RESULTS_MD = ROOT / "docs" / "results.md"


def documented_command() -> list[str]:
    """The `composer report ... --update-markdown docs/results.md` command results.md names at its top."""
    found = re.search(r"`(composer report [^`]*--update-markdown docs/results\.md)`", RESULTS_MD.read_text()[:2000])
    assert found, "docs/results.md names no `composer report ... --update-markdown docs/results.md` command at its top"
    return shlex.split(found.group(1))[1:]


def _retarget(argv: list[str], out: Path, markdown: Path) -> list[str]:
    argv = list(argv)
    argv[argv.index("--out") + 1] = str(out)
    argv[argv.index("--update-markdown") + 1] = str(markdown)
    return argv


def test_results_md_is_its_generated_report(tmp_path, monkeypatch, capsys):
    copy = tmp_path / "results.md"
    shipped = RESULTS_MD.read_bytes()
    # blank every block's body first, so the comparison cannot pass by leaving the file as it was
    blank, names = replace_blocks(shipped.decode("utf-8"), _AnyName(""))
    assert len(names) >= 8 and blank.encode("utf-8") != shipped
    copy.write_text(blank, encoding="utf-8")
    monkeypatch.chdir(ROOT)  # the command's relative inputs (and so the captions) as written
    assert main(_retarget(documented_command(), tmp_path / "report", copy)) == 0
    assert "(generated blocks)" in capsys.readouterr().out
    assert copy.read_bytes() == shipped, "docs/results.md differs from its regenerated blocks: rerun its command"


def test_unknown_block_is_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    doc = tmp_path / "doc.md"
    text = "# t\n<!-- composer report: landscape begin -->\n<!-- composer report: landscape end -->\n" \
           "<!-- composer report: no_such_table begin -->\nold\n<!-- composer report: no_such_table end -->\n"
    doc.write_text(text)
    monkeypatch.chdir(ROOT)
    argv = _retarget(documented_command(), tmp_path / "report", doc)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown block 'no_such_table'" in err[0] and "doc.md:4" in err[0]
    assert doc.read_text() == text and not (tmp_path / "report").exists()


@pytest.mark.parametrize("text, message", [
    ("<!-- composer report: a begin -->\nx\n", "block 'a' has no end marker"),
    ("<!-- composer report: a begin -->\n<!-- composer report: a begin -->\n", "begins inside block 'a'"),
    ("<!-- composer report: a end -->\n", "end of block 'a' without its begin"),
    ("<!-- composer report: a begin -->\n<!-- composer report: a end -->\n" * 2, "block 'a' appears twice"),
])
def test_malformed_blocks(text, message):
    with pytest.raises(MarkdownBlockError, match=re.escape(message)):
        replace_blocks(text, {"a": "body"})


def test_only_the_blocks_change():
    text = "head\n<!-- composer report: a begin -->\nold\nlines\n<!-- composer report: a end -->\ntail\n"
    new, names = replace_blocks(text, {"a": "new"})
    assert names == ["a"] and new == "head\n<!-- composer report: a begin -->\nnew\n<!-- composer report: a end -->\ntail\n"


class _AnyName(dict):
    """Contents for every block name: ``body``."""

    def __init__(self, body: str) -> None:
        super().__init__()
        self.body = body

    def __contains__(self, name: object) -> bool:
        return True

    def __getitem__(self, name: str) -> str:
        return self.body
