"""composer: kernel composer and crossover lab for an FP64 tensor-product DG operator.

``composer.dg`` holds the numerics and the NumPy reference; ``composer.tendency`` evaluates
the same operator on the GPU through one of the implementation paths.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def tendency(fields: Any, order: int, grid: object, path: str = "GEMM", **options: Any) -> Any:
    """GPU tendency with the signature of ``composer.dg.reference_tendency`` (see composer.api)."""
    from composer.api import tendency as _tendency

    return _tendency(fields, order, grid, path=path, **options)
