"""Shared pytest configuration: tests marked ``gpu`` are skipped unless a CUDA GPU is usable."""

import pytest


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
