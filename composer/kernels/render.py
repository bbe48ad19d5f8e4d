"""Jinja2 rendering of CUDA C++ kernel templates (``*.cu.j2``).

StrictUndefined turns a missing template parameter into an error instead of silently emitting
an empty string into C++. Other packages (e.g. ``composer.fused``) pass their own template dir.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jinja2

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"


@cache
def environment(template_dir: Path = TEMPLATE_DIR) -> jinja2.Environment:
    """The (cached) Environment loading templates from ``template_dir``."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render(template_name: str, /, *, template_dir: Path | str | None = None, **params: object) -> str:
    """Render ``template_name`` from ``template_dir`` (default: composer/kernels/templates)."""
    directory = Path(template_dir).resolve() if template_dir is not None else TEMPLATE_DIR
    return environment(directory).get_template(template_name).render(**params)
