"""The campaign's own record, ``DIR/campaign.json``: each step's status and time, the field checks
done, and one entry per session (start, budget, how it stopped). Rewritten atomically after every
change, so an interruption at any moment leaves the last complete state.

Why a journal on top of the commands' own resumable results: it is what lets a rerun of the same
command skip finished steps without asking each one, price what is left, and say where the last
session stopped. The measurements themselves are never kept here: a bench step's runs are in its
``runs.jsonl`` the moment each finishes, so a step interrupted halfway resumes with its runs kept.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from composer.errors import ComposerError
from composer.fileio import atomic_write_text

JOURNAL = "campaign.json"
SCHEMA = 1
DONE, FAILED, RUNNING, INTERRUPTED = "done", "failed", "running", "interrupted"


def now_utc() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Journal:
    def __init__(self, root: Path, data: dict[str, Any]) -> None:
        self.root = Path(root)
        self.data = data

    @property
    def file(self) -> Path:
        return self.root / JOURNAL

    @classmethod
    def open(cls, root: Path) -> Journal:
        """The journal of ``root`` (a new one when there is none); a clear error when it is corrupt."""
        file = Path(root) / JOURNAL
        if not file.is_file():
            return cls(Path(root), {"schema": SCHEMA, "created_utc": now_utc(), "steps": {}, "validated": {},
                                    "sessions": []})
        try:
            data = json.loads(file.read_text())
        except ValueError as exc:
            raise ComposerError(f"{file}: not valid JSON ({exc}); move it away to start the campaign afresh") from None
        if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("steps"), dict):
            raise ComposerError(f"{file}: not a campaign journal of schema {SCHEMA}; move it away to start afresh")
        data.setdefault("validated", {})
        data.setdefault("sessions", [])
        return cls(Path(root), data)

    def save(self) -> None:
        atomic_write_text(self.file, json.dumps(self.data, indent=1, sort_keys=True) + "\n")

    # steps -------------------------------------------------------------------------------------
    def status(self, step_id: str) -> str | None:
        entry = self.data["steps"].get(step_id)
        return entry.get("status") if entry else None

    def mark(self, step_id: str, status: str, **fields: Any) -> None:
        entry = self.data["steps"].setdefault(step_id, {})
        entry.update(status=status, updated_utc=now_utc(), **fields)
        self.save()

    def seconds(self, step_id: str) -> float:
        return float(self.data["steps"].get(step_id, {}).get("seconds", 0.0))

    # field checks ------------------------------------------------------------------------------
    @staticmethod
    def cell(path: str, order: int) -> str:
        return f"{path}@p{order}"

    def validated(self, path: str, order: int) -> bool:
        return self.cell(path, order) in self.data["validated"]

    def record_validation(self, path: str, order: int, error: float | None, by: str) -> None:
        self.data["validated"][self.cell(path, order)] = {"error": error, "by": by}
        self.save()

    # sessions ----------------------------------------------------------------------------------
    def start_session(self, argv: list[str], budget_s: float | None) -> None:
        self.data["sessions"].append({"started_utc": now_utc(), "argv": argv, "budget_s": budget_s})
        self.save()

    def end_session(self, stopped: str, steps_done: int, note: str = "") -> None:
        self.data["sessions"][-1].update(ended_utc=now_utc(), stopped=stopped, steps_done=steps_done, note=note)
        self.save()


__all__ = ["DONE", "FAILED", "INTERRUPTED", "JOURNAL", "Journal", "RUNNING", "now_utc"]
