"""Single import point for cuda-python so the package imports (and reports) cleanly without it.

cuda-bindings is an optional dependency (the ``gpu`` extra): CPU-only users of the manifest and
grid-rule code must be able to import ``composer.runtime`` even when it is absent.
"""

from __future__ import annotations

from types import ModuleType

driver: ModuleType | None
nvrtc: ModuleType | None
try:
    from cuda.bindings import driver, nvrtc
    IMPORT_ERROR: ImportError | None = None
except ImportError as exc:  # pragma: no cover - exercised only without cuda-bindings
    driver = nvrtc = None
    IMPORT_ERROR = exc


def require_driver() -> ModuleType:
    """Return ``cuda.bindings.driver`` or raise NoGpuError explaining what is missing."""
    if driver is None:
        from .errors import NoGpuError

        raise NoGpuError(f"cuda-bindings is not installed ({IMPORT_ERROR}); install composer-dg[gpu]")
    return driver


def require_nvrtc() -> ModuleType:
    """Return ``cuda.bindings.nvrtc`` or raise ImportError; NVRTC needs no GPU, only the package."""
    if nvrtc is None:
        raise ImportError(f"cuda-bindings is not installed ({IMPORT_ERROR}); install composer-dg[gpu]")
    return nvrtc
