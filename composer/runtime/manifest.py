"""JSON manifests describing CUBINs built elsewhere (e.g. by CuTe DSL on a CPU host).

A manifest lets a GPU machine load kernels it cannot build: it records, per kernel, the entry
symbol, the CUBIN file and its sha256 (stale/corrupt detection), the launch block, dynamic shared
memory, the ordered C parameter list and a grid rule evaluated by the safe ``gridexpr``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from composer.fileio import atomic_write_bytes

from . import gridexpr
from .errors import ManifestError
from .params import CTYPES, Param

#: The build directory (`composer build --out`) the GPU paths load cross-compiled kernels from.
BUILD_DIR_ENV = "COMPOSER_BUILD_DIR"

SCHEMA = "composer.kernel-manifest"
VERSION = 1
_REQUIRED = ("symbol", "cubin", "sha256", "block", "dynamic_smem", "params", "grid_rule", "arch")
_OPTIONAL = ("config", "compiler")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def requested_build_dir(explicit: str | Path | None = None) -> Path | None:
    """The build directory a path was given (its ``build_dir`` option), else ``$COMPOSER_BUILD_DIR``."""
    chosen = explicit or os.environ.get(BUILD_DIR_ENV)
    return Path(chosen) if chosen else None


def file_sha256(path: Path | str) -> str:
    """Hex sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass(frozen=True)
class KernelEntry:
    """One kernel of a manifest; ``base_dir`` (not serialized) is where ``cubin`` is resolved."""

    symbol: str
    cubin: str
    sha256: str
    block: tuple[int, int, int]
    dynamic_smem: int
    params: tuple[Param, ...]
    grid_rule: str | int | dict[str, str | int]
    arch: str
    config: dict[str, Any] = field(default_factory=dict)
    compiler: dict[str, Any] = field(default_factory=dict)
    base_dir: Path | None = field(default=None, compare=False)

    @property
    def cubin_path(self) -> Path:
        """Absolute-or-relative path of the CUBIN file (relative to ``base_dir`` when set)."""
        return (self.base_dir / self.cubin) if self.base_dir is not None else Path(self.cubin)

    def grid(self, **names: int) -> tuple[int, int, int]:
        """Evaluate the grid rule: a string/int gives grid.x; a dict gives any of x, y, z (others 1)."""
        rule = self.grid_rule if isinstance(self.grid_rule, dict) else {"x": self.grid_rule}
        dims = tuple(gridexpr.evaluate(rule.get(ax, 1), names) for ax in "xyz")
        if min(dims) < 1:
            raise gridexpr.GridRuleError(f"{self.symbol}: grid {dims} from rule {self.grid_rule!r} has a dim < 1")
        return dims  # type: ignore[return-value]

    def verify(self) -> None:
        """Raise ManifestError if the CUBIN is missing or its sha256 differs from the manifest's."""
        path = self.cubin_path
        if not path.is_file():
            raise ManifestError(f"{path}: cubin of kernel {self.symbol!r} not found")
        actual = file_sha256(path)
        if actual != self.sha256:
            raise ManifestError(f"{path}: cubin of kernel {self.symbol!r} is stale or corrupt: "
                                f"sha256 {actual} != manifest sha256 {self.sha256}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (without base_dir)."""
        return {
            "symbol": self.symbol, "cubin": self.cubin, "sha256": self.sha256, "block": list(self.block),
            "dynamic_smem": self.dynamic_smem, "params": [{"name": p.name, "ctype": p.ctype} for p in self.params],
            "grid_rule": self.grid_rule, "config": self.config, "arch": self.arch, "compiler": self.compiler,
        }


def _fail(where: str, key: str, msg: str) -> ManifestError:
    return ManifestError(f"{where}: key {key!r}: {msg}")


def _nonneg_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def entry_from_dict(raw: Any, where: str, base_dir: Path | None = None) -> KernelEntry:
    """Validate one kernel record; ``where`` (file and index) prefixes every error message."""
    if not isinstance(raw, Mapping):
        raise ManifestError(f"{where}: a kernel record must be an object, got {type(raw).__name__}")
    for key in _REQUIRED:
        if key not in raw:
            raise _fail(where, key, "missing")
    unknown = set(raw) - set(_REQUIRED) - set(_OPTIONAL)
    if unknown:
        raise _fail(where, min(unknown), f"unknown key (allowed: {', '.join(_REQUIRED + _OPTIONAL)})")
    for key in ("symbol", "cubin", "arch"):
        if not isinstance(raw[key], str) or not raw[key]:
            raise _fail(where, key, f"expected a non-empty string, got {raw[key]!r}")
    if Path(raw["cubin"]).is_absolute() or ".." in Path(raw["cubin"]).parts:
        raise _fail(where, "cubin", f"must be a file name relative to the manifest, got {raw['cubin']!r}")
    if not isinstance(raw["sha256"], str) or not _HEX64.match(raw["sha256"]):
        raise _fail(where, "sha256", f"expected 64 lowercase hex digits, got {raw['sha256']!r}")
    block = raw["block"]
    if not (isinstance(block, list) and len(block) == 3 and all(_nonneg_int(b) and b > 0 for b in block)):
        raise _fail(where, "block", f"expected [x, y, z] of positive ints, got {block!r}")
    if not _nonneg_int(raw["dynamic_smem"]):
        raise _fail(where, "dynamic_smem", f"expected a non-negative int, got {raw['dynamic_smem']!r}")
    if not isinstance(raw["params"], list):
        raise _fail(where, "params", "expected a list of {name, ctype}")
    plist = []
    for i, p in enumerate(raw["params"]):
        if not (isinstance(p, Mapping) and set(p) == {"name", "ctype"} and isinstance(p["name"], str)):
            raise _fail(where, f"params[{i}]", f"expected {{'name': str, 'ctype': str}}, got {p!r}")
        if p["ctype"] not in CTYPES:
            raise _fail(where, f"params[{i}].ctype", f"{p['ctype']!r} not in {sorted(CTYPES)}")
        plist.append(Param(p["name"], p["ctype"]))
    rule = raw["grid_rule"]
    rules = rule if isinstance(rule, Mapping) else {"x": rule}
    if isinstance(rule, Mapping) and (not rule or set(rule) - {"x", "y", "z"}):
        raise _fail(where, "grid_rule", f"a dict rule needs keys among x, y, z, got {sorted(rule)}")
    for ax, expr in rules.items():
        try:
            gridexpr.check_rule(expr)
        except gridexpr.GridRuleError as exc:
            raise _fail(where, "grid_rule" + (f".{ax}" if isinstance(rule, Mapping) else ""), str(exc)) from None
    for key in _OPTIONAL:
        if key in raw and not isinstance(raw[key], Mapping):
            raise _fail(where, key, f"expected an object, got {type(raw[key]).__name__}")
    return KernelEntry(
        symbol=raw["symbol"], cubin=raw["cubin"], sha256=raw["sha256"], block=tuple(block),  # type: ignore[arg-type]
        dynamic_smem=raw["dynamic_smem"], params=tuple(plist),
        grid_rule=dict(rule) if isinstance(rule, Mapping) else rule, arch=raw["arch"],
        config=dict(raw.get("config", {})), compiler=dict(raw.get("compiler", {})), base_dir=base_dir)


def write_manifest(path: Path | str, entries: Iterable[KernelEntry | Mapping[str, Any]]) -> None:
    """Validate and atomically write a manifest; an empty ``sha256`` is filled from the CUBIN file."""
    path = Path(path)
    records = []
    for i, ent in enumerate(entries):
        raw = dict(ent.to_dict() if isinstance(ent, KernelEntry) else ent)
        if not raw.get("sha256"):
            raw["sha256"] = file_sha256(path.parent / raw["cubin"])
        records.append(entry_from_dict(raw, f"{path}: kernels[{i}]").to_dict())
    doc = {"schema": SCHEMA, "version": VERSION, "kernels": records}
    atomic_write_bytes(path, (json.dumps(doc, indent=2) + "\n").encode())


def read_manifest(path: Path | str, verify: bool = True) -> list[KernelEntry]:
    """Parse and validate a manifest; with ``verify`` each CUBIN's sha256 is checked."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise ManifestError(f"{path}: manifest not found") from None
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path}: invalid JSON ({exc})") from None
    if not isinstance(doc, Mapping):
        raise ManifestError(f"{path}: top level must be an object")
    if doc.get("schema") != SCHEMA:
        raise ManifestError(f"{path}: key 'schema': expected {SCHEMA!r}, got {doc.get('schema')!r}")
    if doc.get("version") != VERSION:
        raise ManifestError(f"{path}: key 'version': expected {VERSION}, got {doc.get('version')!r}")
    if not isinstance(doc.get("kernels"), list):
        raise ManifestError(f"{path}: key 'kernels': expected a list")
    entries = [entry_from_dict(raw, f"{path}: kernels[{i}]", path.parent) for i, raw in enumerate(doc["kernels"])]
    symbols = [e.symbol for e in entries]
    dup = {s for s in symbols if symbols.count(s) > 1}
    if dup:
        raise ManifestError(f"{path}: key 'symbol': duplicate kernel symbols {sorted(dup)}")
    if verify:
        for ent in entries:
            ent.verify()
    return entries


def with_base_dir(entry: KernelEntry, base_dir: Path | str) -> KernelEntry:
    """Copy of ``entry`` resolving its CUBIN under ``base_dir``."""
    return replace(entry, base_dir=Path(base_dir))
