"""Shared pytest configuration: tests marked ``gpu`` are skipped unless a CUDA GPU is usable, no
test reads the user's own schedules directory, and every test loads the generic schedules whatever
GPU the process opened (a test of the machine overlays names its machine itself)."""

import pytest


@pytest.fixture(autouse=True)
def _no_user_schedules(tmp_path_factory, monkeypatch):
    """The schedule loader reads ``$COMPOSER_SCHEDULES`` or ``~/.config/composer/schedules`` before
    the packaged schedules: point both away from the user's files (a test that wants a user
    directory sets its own)."""
    monkeypatch.delenv("COMPOSER_SCHEDULES", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg_config")))
    # an H100 host's opened GPU would otherwise swap in its overlay's tables (composer.config.machine_schedules)
    monkeypatch.setenv("COMPOSER_SCHEDULE_MACHINE", "generic")


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    from composer.runtime.device import gpu_available

    if gpu_available():
        return
    skip = pytest.mark.skip(reason="no NVIDIA GPU/driver available")
    for item in gpu_items:
        item.add_marker(skip)


PLAIN_FORM_KEYS = ("element_bricks", "interior_maps", "exterior_maps")


@pytest.fixture
def plain_p7(tmp_path_factory, monkeypatch):
    """A user schedules directory whose p = 7 tables are the packaged ones without element bricks or the
    map keys: the plain, mapped, single-element form the element-order, local-interior and face-links
    families start from. Tests of those families use it, so that they hold whichever p = 7 tables ship
    (session 34 measured the bricked, linked ones on the H200). Returns the directory."""
    import re

    from composer.config import schedule_files

    text = (schedule_files.packaged_dir() / "p0007.toml").read_text()
    plain = re.sub(rf"(?m)^({'|'.join(PLAIN_FORM_KEYS)}) = .*\n", "", text)
    directory = tmp_path_factory.mktemp("plain_p7")
    (directory / "p0007.toml").write_text(plain)
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(directory))
    return directory


XFACES_TABLES = __import__("pathlib").Path(__file__).parent / "data" / "schedules_s26"


@pytest.fixture
def xfaces_tables(monkeypatch):
    """A user schedules directory holding the p = 7 and 15 schedules as they shipped from session 26 to 35
    (tests/data/schedules_s26: the tables of `traces = "xfaces"`, `flux_tiles` and `x_pairs` at one block per
    element), the form the x-chain, trace-cluster, flux-tile, tile-swizzle, xfaces, carveout and shape-twin
    families were written against. Since session 36 the H200 ships other tables at both orders (the face links at
    p = 7, the xyz clusters at p = 15); tests of those families use this fixture so that they hold whichever
    tables ship. Returns the directory."""
    monkeypatch.setenv("COMPOSER_SCHEDULES", str(XFACES_TABLES))
    return XFACES_TABLES
