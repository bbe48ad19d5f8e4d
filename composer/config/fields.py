"""Typed access to parsed TOML tables, with errors that name the file and the dotted key.

Every loader in ``composer.config`` goes through here so that all configuration errors read the
same way: ``<file>: <dotted.key>: expected <what>, got <value>``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from composer.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

T = TypeVar("T")


class Expected(Exception):
    """Raised by a checker; carries the human description of what was expected."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


Checker = Callable[[Any], T]


def parse_toml(text: str, file: str) -> dict[str, Any]:
    """Parse TOML text; a syntax error becomes a ConfigError naming ``file``."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: TOML syntax error: {exc}") from None


def read_text(path: Path | Any, file: str | None = None) -> str:
    """A text file's contents (a ``Path`` or an ``importlib.resources`` Traversable); an unreadable
    file becomes a ConfigError naming ``file``."""
    name = file if file is not None else str(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{name}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{name}: cannot read: {exc}") from None


def read_toml(path: Path | Any, file: str | None = None) -> dict[str, Any]:
    """Read and parse a TOML file (a ``Path`` or an ``importlib.resources`` Traversable)."""
    name = file if file is not None else str(path)
    return parse_toml(read_text(path, name), name)


# --- checkers: value -> converted value, or raise Expected ------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def positive_int(value: Any) -> int:
    if _is_int(value) and value > 0:
        return int(value)
    raise Expected("a positive integer")


def non_negative_int(value: Any) -> int:
    if _is_int(value) and value >= 0:
        return int(value)
    raise Expected("a non-negative integer")


def positive_float(value: Any) -> float:
    """Accepts TOML floats and integers (``dt = 1`` is a valid time step)."""
    if (_is_int(value) or isinstance(value, float)) and math.isfinite(value) and value > 0:
        return float(value)
    raise Expected("a positive float")


def boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise Expected("a boolean (true or false)")


def string(value: Any) -> str:
    if isinstance(value, str) and value.strip():
        return value
    raise Expected("a non-empty string")


def one_of(choices: Iterable[str]) -> Checker[str]:
    """A checker accepting exactly the strings ``choices`` (listed sorted in the error)."""
    allowed = tuple(sorted(choices))

    def check(value: Any) -> str:
        if isinstance(value, str) and value in allowed:
            return value
        raise Expected("one of " + ", ".join(repr(c) for c in allowed))

    return check


def grid3(value: Any) -> tuple[int, int, int]:
    """An element grid ``[NeX, NeY, NeZ]`` of positive integers."""
    if isinstance(value, list) and len(value) == 3 and all(_is_int(v) and v > 0 for v in value):
        return (int(value[0]), int(value[1]), int(value[2]))
    raise Expected("a list of three positive integers [NeX, NeY, NeZ]")


# --- tables -----------------------------------------------------------------------------------


class Table:
    """One TOML table being validated: hands out typed values and remembers which keys were used.

    ``origins`` maps a key to the file it came from when a table was merged from several files
    (a user machine file over the shipped one), so the error names the right file.
    """

    def __init__(
        self,
        data: Mapping[str, Any],
        file: str,
        path: str = "",
        origins: Mapping[str, str] | None = None,
    ) -> None:
        self.data = data
        self.file = file
        self.path = path
        self._origins = dict(origins or {})
        self._used: set[str] = set()

    def dotted(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def file_of(self, key: str) -> str:
        return self._origins.get(key, self.file)

    def error(self, key: str, message: str) -> ConfigError:
        """A ConfigError for ``key`` of this table (``key=''`` means the table itself)."""
        where = self.dotted(key) if key else (self.path or "<top level>")
        return ConfigError(f"{self.file_of(key)}: {where}: {message}")

    def required(self, key: str, check: Checker[T]) -> T:
        self._used.add(key)
        if key not in self.data:
            raise self.error(key, "missing required key")
        return self._check(key, check)

    def optional(self, key: str, check: Checker[T], default: Any = None) -> Any:
        self._used.add(key)
        if key not in self.data:
            return default
        return self._check(key, check)

    def table(self, key: str) -> Table:
        """A required sub-table."""
        table = self.optional_table(key)
        if table is None:
            raise self.error(key, "missing required table")
        return table

    def optional_table(self, key: str) -> Table | None:
        """A sub-table, or ``None`` when absent."""
        self._used.add(key)
        if key not in self.data:
            return None
        value = self.data[key]
        if not isinstance(value, dict):
            raise self.error(key, f"expected a table, got {value!r}")
        return Table(value, self.file_of(key), self.dotted(key))

    def reject_unknown(self) -> None:
        """Fail on the first key that no ``required``/``optional``/``table`` call asked for."""
        unknown = sorted(set(self.data) - self._used)
        if unknown:
            allowed = ", ".join(sorted(self._used)) or "none"
            raise self.error(unknown[0], f"unknown key (allowed here: {allowed})")

    def _check(self, key: str, check: Checker[T]) -> T:
        value = self.data[key]
        try:
            return check(value)
        except Expected as exc:
            raise self.error(key, f"expected {exc.what}, got {value!r}") from None
