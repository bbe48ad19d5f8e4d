"""Cross-compile a GemmConfig to a CUBIN with the CuTe DSL, on a machine without a GPU.

``cute.compile(..., options="--gpu-arch=sm_XX --keep-cubin --dump-dir=DIR")`` runs the DSL's
bundled ptxas (13.4; the system ptxas cannot read its PTX 9.4) with no driver present. Dump file
names ignore compile-time constants, so every compile gets its own temporary dump directory.
Compiled CUBINs are cached on disk by (config, arch, entry name, DSL version, kernel source
hash): a test run or an incremental ``composer build`` compiles each kernel once.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from composer.gemm.cute.config import GemmConfig, resolve_epilogue
from composer.gemm.cute.epilogue import Epilogue
from composer.runtime.elf import entry_points
from composer.fileio import atomic_write_bytes

_SOURCES = ("kernel.py", "atom.py", "epilogue.py", "swizzle.py", "config.py", "compile.py")
#: The epilogue-tree modules the kernel traces (composer.epilogues): part of the source hash too.
_TREE_SOURCES = ("tree.py", "index.py", "evaluate.py", "cute_emit.py")


@dataclass(frozen=True)
class CuteCubin:
    """A compiled kernel: the CUBIN, its entry symbol, and what produced it."""

    config: GemmConfig
    arch: str
    symbol: str
    cubin: bytes
    dsl_version: str
    from_cache: bool = False


def dsl_version() -> str:
    """Version of the installed nvidia-cutlass-dsl (raises ImportError without it)."""
    from importlib.metadata import version

    return version("nvidia-cutlass-dsl")


@lru_cache(maxsize=1)
def source_hash() -> str:
    """sha256 over this package's kernel sources: editing the kernel invalidates cached CUBINs."""
    h = hashlib.sha256()
    here = Path(__file__).parent
    trees = here.parent.parent / "epilogues"
    for path in [here / name for name in _SOURCES] + [trees / name for name in _TREE_SOURCES]:
        h.update(path.read_bytes())
    return h.hexdigest()


def default_cache_dir() -> Path:
    root = os.environ.get("COMPOSER_CACHE_DIR")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "composer"
    return base / "cute"


def cubin_key(cfg: GemmConfig, arch: str, name: str, epilogue: Epilogue | None = None) -> str:
    payload = {"config": cfg.to_dict(), "arch": arch, "name": name, "dsl": dsl_version(),
               "source": source_hash(), "epilogue": epilogue.key() if epilogue is not None else None}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _dsl_compile(cfg: GemmConfig, arch: str, name: str, epilogue: Epilogue | None) -> bytes:
    import cutlass.cute as cute

    from composer.gemm.cute.kernel import TensorOpDgemm, placeholder_args

    gemm = TensorOpDgemm(cfg, arch, name, epilogue)
    with tempfile.TemporaryDirectory(prefix="composer-cute-") as tmp:
        compiled = cute.compile(gemm, placeholder_args(),
                                options=f"--gpu-arch={arch} --keep-cubin --dump-dir={tmp}")
        cubin = compiled.artifacts.CUBIN  # the image itself, or the path it was dumped to
        if isinstance(cubin, (bytes, bytearray)):
            return bytes(cubin)
        if not cubin or not Path(cubin).is_file():
            raise RuntimeError(f"CuTe DSL produced no CUBIN for {cfg.tag} on {arch}")
        return Path(cubin).read_bytes()


def compile_config(cfg: GemmConfig, arch: str, name: str, cache_dir: Path | None = None,
                   use_cache: bool = True, epilogue: Epilogue | None = None) -> CuteCubin:
    """CUBIN of ``cfg`` for ``arch`` with entry ``<name>_0``; rejects shapes ``arch`` lacks and
    invalid configurations before touching the cache or the DSL. ``epilogue``: the instance of a
    specialized epilogue family (an epilogue tree; ``cfg.epilogue`` names its family)."""
    cfg.validate(arch)
    resolve_epilogue(cfg, epilogue)
    version = dsl_version()
    key = cubin_key(cfg, arch, name, epilogue)
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = directory / f"{key}.cubin"
    if use_cache and path.is_file():
        data = path.read_bytes()
        meta_path = path.with_suffix(".json")
        try:
            meta = json.loads(meta_path.read_text())
            if meta["sha256"] == hashlib.sha256(data).hexdigest():
                return CuteCubin(cfg, arch, meta["symbol"], data, version, from_cache=True)
        except (OSError, ValueError, KeyError):
            pass  # corrupt cache entry: rebuild below
    data = _dsl_compile(cfg, arch, name, epilogue)
    symbols = entry_points(data)
    if len(symbols) != 1:
        raise RuntimeError(f"{cfg.tag} on {arch}: expected one kernel entry, found {symbols}")
    if use_cache:
        atomic_write_bytes(path, data)
        atomic_write_bytes(path.with_suffix(".json"), json.dumps(
            {"symbol": symbols[0], "sha256": hashlib.sha256(data).hexdigest(), "arch": arch,
             "config": cfg.to_dict(), "dsl": version}).encode())
    return CuteCubin(cfg, arch, symbols[0], data, version)
