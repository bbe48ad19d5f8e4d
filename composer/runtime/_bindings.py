"""Single import point for cuda-python so the package imports (and reports) cleanly without it.

cuda-bindings is an optional dependency (the ``gpu`` extra): CPU-only users of the manifest and
grid-rule code must be able to import ``composer.runtime`` even when it is absent.
"""

from __future__ import annotations

from typing import Any

driver: Any = None  # cuda.bindings.driver, or None without cuda-bindings
nvrtc: Any = None  # cuda.bindings.nvrtc, or None
IMPORT_ERROR: ImportError | None = None
try:
    from cuda.bindings import driver, nvrtc  # type: ignore[no-redef]
except ImportError as exc:  # pragma: no cover - exercised only without cuda-bindings
    IMPORT_ERROR = exc


def require_driver() -> Any:
    """Return ``cuda.bindings.driver`` or raise NoGpuError explaining what is missing."""
    if driver is None:
        from .errors import NoGpuError

        raise NoGpuError(f"cuda-bindings is not installed ({IMPORT_ERROR}); install composer-dg[gpu]")
    return driver


def require_nvrtc() -> Any:
    """Return ``cuda.bindings.nvrtc`` or raise ImportError; NVRTC needs no GPU, only the package."""
    if nvrtc is None:
        raise ImportError(f"cuda-bindings is not installed ({IMPORT_ERROR}); install composer-dg[gpu]")
    return nvrtc
