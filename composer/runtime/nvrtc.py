"""NVRTC compilation of self-contained CUDA C++ to CUBIN, with a content-addressed on-disk cache.

The cache lets tests and sweeps re-use kernels across processes; the key covers everything that
changes the binary (source, options, arch, NVRTC version), and a sidecar JSON records size and
sha256 so a truncated or corrupted file is detected and rebuilt instead of loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from composer.arch.limits import DEFAULT_ARCH
from composer.fileio import atomic_write_bytes

from . import _bindings
from .errors import CompileError, check

CACHE_FORMAT = 1
_ARCH_RE = re.compile(r"^sm_(\d{2,3})([af]?)$")
# Options that would break FP64 reproducibility across paths, or that compile_cuda sets itself.
_FORBIDDEN = ("use-fast-math", "ftz=true", "prec-div=false", "prec-sqrt=false", "gpu-architecture", "arch")


@dataclass
class CacheStats:
    """Process-wide counters; tests read them to tell a cache hit from a compile without timing."""

    compiles: int = 0
    hits: int = 0
    rebuilds: int = 0  # cache entries found corrupt and recompiled

    def reset(self) -> None:
        self.compiles = self.hits = self.rebuilds = 0


stats = CacheStats()


@dataclass(frozen=True)
class CompiledKernel:
    """Result of compile_cuda: the CUBIN and what is needed to load and audit it."""

    name: str
    arch: str
    cubin: bytes
    log: str
    lowered_names: dict[str, str] = field(default_factory=dict)
    options: tuple[str, ...] = ()
    nvrtc_version: tuple[int, int] = (0, 0)
    key: str = ""
    from_cache: bool = False

    def symbol(self, entry: str) -> str:
        """The name to pass to cuModuleGetFunction for a requested entry point."""
        return self.lowered_names[entry]


def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the loaded NVRTC library."""
    major, minor = check(_bindings.require_nvrtc().nvrtcVersion(), "nvrtcVersion")
    return int(major), int(minor)


def supported_archs() -> list[int]:
    """The compute capabilities (80, 90, 100, ...) the loaded NVRTC can compile for."""
    return [int(n) for n in check(_bindings.require_nvrtc().nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs")]


def default_cache_dir() -> Path:
    """``$COMPOSER_CACHE_DIR/nvrtc`` if set, else ``~/.cache/composer/nvrtc``."""
    root = os.environ.get("COMPOSER_CACHE_DIR")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "composer"
    return base / "nvrtc"


def validate_arch(arch: str) -> str:
    """Accept real SASS targets such as sm_80, sm_90, sm_90a, sm_100 (a CUBIN needs one)."""
    if not _ARCH_RE.match(arch):
        raise ValueError(f"arch must look like 'sm_90' or 'sm_90a', got {arch!r}")
    return arch


def _validate_options(options: Sequence[str]) -> tuple[str, ...]:
    opts = tuple(str(o) for o in options)
    for opt in opts:
        low = opt.lower().lstrip("-").replace("_", "-")
        for bad in _FORBIDDEN:
            if low.startswith(bad):
                raise ValueError(f"NVRTC option {opt!r} is not allowed (FP64 exactness or set by compile_cuda)")
    return opts


def cache_key(source: str, arch: str, options: Sequence[str], entry_points: Sequence[str],
              version: tuple[int, int]) -> str:
    """sha256 over everything that determines the CUBIN and the lowered names."""
    payload = json.dumps({
        "format": CACHE_FORMAT, "source": source, "arch": arch, "options": sorted(options),
        "entry_points": sorted(entry_points), "nvrtc": list(version),
    }, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def _source_excerpt(source: str, log: str, context: int = 2) -> str:
    """Numbered source lines around each line the NVRTC log complains about."""
    lines = source.splitlines()
    wanted: set[int] = set()
    for m in re.finditer(r"\((\d+)\): (?:error|warning)", log):
        n = int(m.group(1))
        wanted.update(range(max(1, n - context), min(len(lines), n + context) + 1))
    return "\n".join(f"{n:5d} | {lines[n - 1]}" for n in sorted(wanted))


def _program_log(nv, prog) -> str:
    size = check(nv.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
    if size <= 1:
        return ""
    buf = b" " * size
    check(nv.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
    return buf.rstrip(b"\0").decode("utf-8", "replace")


def _nvrtc_compile(source: str, name: str, arch: str, options: tuple[str, ...],
                   entry_points: Sequence[str]) -> tuple[bytes, str, dict[str, str]]:
    nv = _bindings.require_nvrtc()
    prog = check(nv.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        for ep in entry_points:
            check(nv.nvrtcAddNameExpression(prog, ep.encode()), "nvrtcAddNameExpression")
        argv = [f"--gpu-architecture={arch}", "-std=c++17", "-default-device", *options]
        (status,) = nv.nvrtcCompileProgram(prog, len(argv), [a.encode() for a in argv])
        log = _program_log(nv, prog)
        if int(status) != 0:
            raise CompileError(name, arch, log or status.name, _source_excerpt(source, log))
        size = check(nv.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        cubin = b" " * size
        check(nv.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        lowered = {ep: check(nv.nvrtcGetLoweredName(prog, ep.encode()), "nvrtcGetLoweredName").decode()
                   for ep in entry_points}
    finally:
        nv.nvrtcDestroyProgram(prog)
    return cubin, log, lowered


def _load_cached(cubin_path: Path, meta_path: Path, key: str) -> dict | None:
    """Sidecar metadata if the cached CUBIN is intact; None when absent; raises ValueError if corrupt."""
    if not meta_path.exists() and not cubin_path.exists():
        return None
    meta = json.loads(meta_path.read_text())
    data = cubin_path.read_bytes()
    if meta.get("key") != key:
        raise ValueError("key mismatch")
    if len(data) != meta["size"] or hashlib.sha256(data).hexdigest() != meta["sha256"]:
        raise ValueError("size/sha256 mismatch")
    meta["cubin"] = data
    return meta


def compile_cuda(source: str, name: str, arch: str = DEFAULT_ARCH, options: Sequence[str] = (),
                 cache_dir: Path | None = None, entry_points: Sequence[str] = (),
                 use_cache: bool = True, prefer_version: tuple[int, int] | None = None) -> CompiledKernel:
    """Compile ``source`` to a CUBIN for ``arch`` (``-std=c++17 -default-device``, never fast-math).

    ``entry_points`` are the ``extern "C"`` (or template) names whose lowered symbols are returned.
    ``prefer_version``: the NVRTC whose CUBIN to take from the cache when it holds one (compiled
    elsewhere and carried in $COMPOSER_CACHE_DIR: the same source compiles to different code under
    another NVRTC, session 18); otherwise the loaded NVRTC's, as always. The result names the
    version that compiled it. Raises CompileError carrying the NVRTC log and the numbered offending
    source lines.
    """
    validate_arch(arch)
    opts = _validate_options(options)
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if use_cache and prefer_version is not None and tuple(prefer_version) != nvrtc_version():
        other = cache_key(source, arch, opts, entry_points, tuple(prefer_version))
        try:
            meta = _load_cached(directory / f"{other}.cubin", directory / f"{other}.json", other)
        except (OSError, ValueError, KeyError, TypeError):
            meta = None
        if meta is not None:
            stats.hits += 1
            return CompiledKernel(name, arch, meta["cubin"], meta.get("log", ""), dict(meta["lowered_names"]),
                                  opts, tuple(prefer_version), other, from_cache=True)
    version = nvrtc_version()
    key = cache_key(source, arch, opts, entry_points, version)
    cubin_path, meta_path = directory / f"{key}.cubin", directory / f"{key}.json"

    if use_cache:
        try:
            meta = _load_cached(cubin_path, meta_path, key)
        except (OSError, ValueError, KeyError, TypeError):
            meta = None
            stats.rebuilds += 1
        if meta is not None:
            stats.hits += 1
            return CompiledKernel(name, arch, meta["cubin"], meta.get("log", ""), dict(meta["lowered_names"]),
                                  opts, version, key, from_cache=True)

    cubin, log, lowered = _nvrtc_compile(source, name, arch, opts, entry_points)
    stats.compiles += 1
    if use_cache:
        directory.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(cubin_path, cubin)
        meta = {"key": key, "name": name, "arch": arch, "options": list(opts), "nvrtc": list(version),
                "size": len(cubin), "sha256": hashlib.sha256(cubin).hexdigest(), "log": log,
                "lowered_names": lowered}
        atomic_write_bytes(meta_path, json.dumps(meta, indent=1, sort_keys=True).encode())
    return CompiledKernel(name, arch, cubin, log, lowered, opts, version, key, from_cache=False)
