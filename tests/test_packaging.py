"""Every package directory is listed in pyproject.toml (schedules/ is mapped, not discovered)."""

from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_is_listed() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "composer").rglob("__init__.py")}
    assert found - listed == set(), "add these packages to [tool.setuptools] packages"
    assert "composer.schedules" in listed and config["package-dir"]["composer.schedules"] == "schedules"


def test_templates_are_package_data() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    for package in ("composer.kernels", "composer.fused"):
        assert any(p.endswith(".j2") for p in data[package])
    assert list((ROOT / "composer/fused/templates").glob("*.j2"))
