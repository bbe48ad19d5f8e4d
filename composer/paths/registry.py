"""Every implementation path, listed once, and the lookups the rest of the project reads.

The CLI, the build plan, the counts and ``composer info`` ask here for path names, classes and
capabilities (``paths_with(family="fused")``), so adding a path is one class and one line in
``PATHS``. Importing this module imports every path module but none of their optional
dependencies: CuPy (EINSUM), nvmath-python (GEMM) and the CuTe DSL are imported when a path is
constructed or built, never at module level.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from composer.errors import ComposerError
from composer.paths.base import CAPABILITIES, Path
from composer.paths.einsum import EinsumPath
from composer.paths.fused import FusedDfmaPath, FusedPath, FusedTc16Path, FusedTcPath
from composer.paths.gemm import GemmPath
from composer.paths.gemm_cute import GemmCutePath
from composer.paths.gemm_fused import GemmFusedPath

#: The paths in the order listings show them (the library baseline first).
PATHS: tuple[type[Path], ...] = (
    GemmPath,
    GemmCutePath,
    GemmFusedPath,
    EinsumPath,
    FusedPath,
    FusedTcPath,
    FusedDfmaPath,
    FusedTc16Path,
)
_BY_NAME: dict[str, type[Path]] = {cls.name: cls for cls in PATHS}
if len(_BY_NAME) != len(PATHS):
    raise ImportError(f"two registered paths share a name: {[cls.name for cls in PATHS]}")


class UnknownPathError(ComposerError, ValueError):
    """A path name that is not registered."""


def path_names() -> list[str]:
    return list(_BY_NAME)


def path_class(name: str) -> type[Path]:
    """Resolve a path by name (case-insensitive), with a clear error for unknown names."""
    cls = _BY_NAME.get(name.upper())
    if cls is None:
        raise UnknownPathError(f"unknown path {name!r}; available paths: {', '.join(_BY_NAME)}")
    return cls


def paths_with(**capabilities: Any) -> list[type[Path]]:
    """The path classes whose capabilities (``base.CAPABILITIES``) equal the given values, in
    ``PATHS`` order, e.g. ``paths_with(family="fused")``, ``paths_with(needs_build=True)``."""
    unknown = sorted(set(capabilities) - set(CAPABILITIES))
    if unknown:
        raise ValueError(f"paths have no capability {unknown}; capabilities: {', '.join(CAPABILITIES)}")
    return [cls for cls in PATHS if all(getattr(cls, key) == value for key, value in capabilities.items())]


def validate_options(path: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` parsed by ``path``'s declarations; a key it does not read is a ComposerError
    naming the keys it does read."""
    return path_class(path).parse_options(options)


def requested_path_options(options: Mapping[str, Mapping[str, Any]],
                           requested: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Per-path options checked against the paths a command runs: each key must be one its path
    reads, and a path that is not requested may have none (they would be silently ignored).
    Returns the options as given, keyed by the paths' registered names."""
    names = [path_class(p).name for p in requested]
    by_name: dict[str, dict[str, Any]] = {}
    for path, values in options.items():
        by_name.setdefault(path_class(path).name, {}).update(values)
    stray = sorted(set(by_name) - set(names))
    if stray:
        raise ComposerError(f"options for paths that are not requested: {stray} (requested: {', '.join(names)}); "
                            f"they would be ignored")
    for path, values in by_name.items():
        validate_options(path, values)
    return by_name
