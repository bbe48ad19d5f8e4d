"""What produced a sweep: source revision, host, software stack and GPU.

Why: the paper's claim thresholds depend on whether two timings share a build, a node
and a campaign (Section 4.5), and it maps every figure to a job, node and revision
(Section S2). A result without this record cannot be placed under the right threshold.

``collect_provenance`` never raises: each part that cannot be determined is None and the
cause is listed under ``"errors"``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import importlib.metadata
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

#: Distributions whose versions are recorded (None when not installed).
DISTRIBUTIONS = ("composer-dg", "numpy", "cuda-bindings", "cuda-core", "nvidia-ml-py",
                 "nvmath-python", "nvidia-cuda-nvrtc", "rich")
#: Environment variables that change which GPU or which clocks a run sees, and which kernels it runs:
#: a build directory's cubins (COMPOSER_BUILD_DIR) are compiled elsewhere, with another compiler,
#: than the kernels NVRTC compiles on the machine (the session-6 balance runs used such a build and
#: timed FUSED_TC 8-10 % slower than the runs before them, with nothing in their record to say why).
ENV_VARS = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_LAUNCH_BLOCKING",
            "SLURM_JOB_ID", "SLURMD_NODENAME", "PBS_JOBID", "JOB_ID",
            "COMPOSER_BUILD_DIR", "COMPOSER_CACHE_DIR", "COMPOSER_SCHEDULES", "COMPOSER_SCHEDULE_MACHINE")


def _safe(errors: dict[str, str], key: str, fn: Callable[[], T]) -> T | None:
    try:
        return fn()
    except BaseException as exc:  # noqa: BLE001 -- provenance must never abort a sweep
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        errors[key] = f"{type(exc).__name__}: {exc}"
        return None


COMMIT_ENV = "COMPOSER_GIT_COMMIT"


def _git(repo: Path, *args: str) -> str:
    res = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                         timeout=10, check=True)
    return res.stdout.strip()


def git_info(repo: Path) -> dict[str, Any]:
    """Commit (None before the first commit), dirty flag (tracked files only) and branch.

    ``$COMPOSER_GIT_COMMIT``, when set, names the commit (a working tree copied to a GPU machine,
    with no .git or inside a stale checkout); the checkout's own HEAD is kept as checkout_commit.
    """
    try:
        top = _git(repo, "rev-parse", "--show-toplevel")
    except (OSError, subprocess.SubprocessError):
        if not os.environ.get(COMMIT_ENV):
            raise
        return {"toplevel": None, "commit": os.environ[COMMIT_ENV], "commit_source": COMMIT_ENV,
                "dirty": None, "branch": None}
    info: dict[str, Any] = {"toplevel": top, "commit": None, "dirty": None, "branch": None}
    with contextlib.suppress(subprocess.CalledProcessError):  # repo without commits yet
        info["commit"] = _git(repo, "rev-parse", "HEAD")
    info["dirty"] = bool(_git(repo, "status", "--porcelain", "--untracked-files=no"))
    with contextlib.suppress(subprocess.CalledProcessError):
        info["branch"] = _git(repo, "rev-parse", "--abbrev-ref", "HEAD")
    if os.environ.get(COMMIT_ENV):
        # A working tree copied to a GPU machine names its commit here; the copy may sit in a stale
        # checkout (the device tool keeps an older .git), whose HEAD is then kept for reference.
        info["checkout_commit"] = info["commit"]
        info["commit"] = os.environ[COMMIT_ENV]
        info["commit_source"] = COMMIT_ENV
    return info


def package_versions(names: tuple[str, ...] = DISTRIBUTIONS) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def _text(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def _gpu_info(nvml: Any, i: int, errs: dict[str, str]) -> dict[str, Any]:
    """Identity, limits and clocks of GPU ``i``; each missing field is None + an error."""
    h = nvml.nvmlDeviceGetHandleByIndex(i)
    mhz = {"max_sm_clock_mhz": nvml.NVML_CLOCK_SM, "max_mem_clock_mhz": nvml.NVML_CLOCK_MEM}
    queries: dict[str, Callable[[], Any]] = {
        "name": lambda: _text(nvml.nvmlDeviceGetName(h)),
        "uuid": lambda: _text(nvml.nvmlDeviceGetUUID(h)),
        "pci_bus_id": lambda: _text(nvml.nvmlDeviceGetPciInfo(h).busId),
        "compute_capability": lambda: list(nvml.nvmlDeviceGetCudaComputeCapability(h)),
        "memory_total_bytes": lambda: int(nvml.nvmlDeviceGetMemoryInfo(h).total),
        **{k: (lambda c=c: int(nvml.nvmlDeviceGetMaxClockInfo(h, c))) for k, c in mhz.items()},
        "enforced_power_limit_w": lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
        "default_power_limit_w":
            lambda: nvml.nvmlDeviceGetPowerManagementDefaultLimit(h) / 1000.0,
        "persistence_mode": lambda: int(nvml.nvmlDeviceGetPersistenceMode(h)),
    }
    info: dict[str, Any] = {"index": i}
    for key, fn in queries.items():
        info[key] = _safe(errs, f"gpu{i}.{key}", fn)
    return info


def nvml_info(nvml: Any = None) -> dict[str, Any]:
    """Driver and per-GPU identity/limits from NVML (raises if NVML is unavailable)."""
    if nvml is None:
        import pynvml as nvml  # nvidia-ml-py
    nvml.nvmlInit()
    try:
        errs: dict[str, str] = {}
        out: dict[str, Any] = {
            "driver_version": _text(nvml.nvmlSystemGetDriverVersion()),
            "cuda_driver_version": _safe(errs, "cuda_driver_version",
                                         lambda: int(nvml.nvmlSystemGetCudaDriverVersion_v2())),
            "nvml_version": _safe(errs, "nvml_version",
                                  lambda: _text(nvml.nvmlSystemGetNVMLVersion())),
            "gpus": [],
        }
        for i in range(int(nvml.nvmlDeviceGetCount())):
            out["gpus"].append(_gpu_info(nvml, i, errs))
        if errs:
            out["errors"] = errs
        return out
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def cuda_driver_version() -> int:
    """CUDA driver API version (e.g. 13000) via cuda.bindings; raises without a driver."""
    from cuda.bindings import driver

    err, version = driver.cuDriverGetVersion()
    if int(err) != 0:
        raise RuntimeError(f"cuDriverGetVersion: {err}")
    return int(version)


def collect_provenance(repo: str | os.PathLike[str] | None = None,
                       nvml: Any = None) -> dict[str, Any]:
    """Provenance of this process; ``repo`` defaults to the directory of this package."""
    errors: dict[str, str] = {}
    repo_path = Path(repo) if repo is not None else Path(__file__).resolve().parents[2]
    return {
        "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "hostname": _safe(errors, "hostname", socket.gethostname),
        "platform": _safe(errors, "platform", platform.platform),
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "argv": list(sys.argv),
        "git": _safe(errors, "git", lambda: git_info(repo_path)),
        "packages": _safe(errors, "packages", package_versions),
        "env": {k: os.environ.get(k) for k in ENV_VARS if k in os.environ},
        "nvml": _safe(errors, "nvml", lambda: nvml_info(nvml)),
        "cuda_driver_version": _safe(errors, "cuda_driver_version", cuda_driver_version),
        "errors": errors,
    }


__all__ = ["collect_provenance", "git_info", "package_versions", "nvml_info",
           "cuda_driver_version", "DISTRIBUTIONS"]
