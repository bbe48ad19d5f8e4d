"""Incremental cross-compilation of a build plan into ``BUILD_DIR/*.cubin`` + ``manifest.json``.

A job is up to date when the manifest holds an entry for it whose recorded build key and
compiler versions match and whose CUBIN exists, hashes to the recorded sha256 and defines the
recorded entry symbol; anything else (missing, truncated, edited, built by another compiler or
for another configuration) is recompiled. Entries of other configurations already in the
manifest are kept, so several ``composer build --mma ...`` runs can share one directory.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from composer.build.plan import BuildJob
from composer.errors import ComposerError
from composer.runtime.elf import entry_points
from composer.runtime.errors import ManifestError
from composer.fileio import atomic_write_bytes
from composer.runtime.manifest import (KernelEntry, entry_from_dict, file_sha256, read_manifest,
                                       write_manifest)

MANIFEST = "manifest.json"


class BuildError(ComposerError):
    """A kernel of the plan failed to compile."""


@dataclass
class BuildReport:
    """What a build did: job names compiled, reused, and the reasons for each rebuild."""

    built: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    manifest: Path | None = None


def _compiler_versions(kind: str) -> dict[str, str]:
    """The compiler identity a job of ``kind`` records (NVRTC for "nvrtc" and "fused")."""
    if kind == "cute":
        from composer.gemm.cute.compile import dsl_version, source_hash

        return {"nvidia-cutlass-dsl": dsl_version(), "kernel_source": source_hash()[:16]}
    from composer.runtime.nvrtc import nvrtc_version

    major, minor = nvrtc_version()
    return {"nvrtc": f"{major}.{minor}"}


def _stale_reason(job: BuildJob, entry: KernelEntry | None, out: Path, compiler: dict[str, str]) -> str:
    """Why ``entry`` cannot serve ``job`` ("" when it can)."""
    if entry is None:
        return "new"
    if entry.config.get("build_key") != job.key or entry.arch != job.arch:
        return "configuration changed"
    if entry.compiler != compiler:
        return "compiler changed"
    path = out / entry.cubin
    if not path.is_file():
        return "cubin missing"
    if file_sha256(path) != entry.sha256:
        return "cubin corrupt or modified (sha256 mismatch)"
    try:
        if entry.symbol not in entry_points(path.read_bytes()):
            return "cubin lacks its entry symbol"
    except ValueError:
        return "cubin is not an ELF image"
    return ""


def _tree_epilogue(described: dict):
    """The kernel epilogue of a job's recorded epilogue tree (``FusedGemm.describe``)."""
    from composer.epilogues.cute_emit import TreeEpilogue
    from composer.epilogues.index import OutputIndex
    from composer.epilogues.tree import from_dict

    return TreeEpilogue(from_dict(described["tree"]), OutputIndex(**described["index"]), described["store_group"])


def _compile_cute(job: BuildJob, out: Path) -> dict:
    from composer.gemm.cute.compile import compile_config
    from composer.gemm.cute.config import KERNEL_PARAMS, GemmConfig

    cfg = GemmConfig.from_dict(job.spec["config"])
    described = job.spec.get("epilogue")
    epilogue = _tree_epilogue(described) if described else None
    built = compile_config(cfg, job.arch, job.name, epilogue=epilogue)
    cubin = f"{job.name}.cubin"
    atomic_write_bytes(out / cubin, built.cubin)
    return {
        "symbol": built.symbol, "cubin": cubin, "sha256": "", "block": [cfg.block_threads, 1, 1],
        "dynamic_smem": cfg.smem_bytes,
        "params": [{"name": p.name, "ctype": p.ctype} for p in KERNEL_PARAMS],
        "grid_rule": {"x": cfg.grid_rule()}, "arch": job.arch,
        "config": {"kind": "cute_gemm", "order": job.order, "role": job.spec["role"],
                   "swap": job.spec["swap"], "gemm": cfg.to_dict(), "mma": cfg.mma,
                   "mma_per_ktile": cfg.mma_per_ktile, "epilogue": described or "store",
                   **({"fused": job.spec["fused"]} if "fused" in job.spec else {})},
    }


def _compile_nvrtc(job: BuildJob, out: Path) -> dict:
    from composer.kernels.support import SIGNATURES, _PAIRED, compile_support

    family, nq, block = job.spec["family"], job.spec["nq"], job.spec["block"]
    built = compile_support(family, nq, job.arch, block)
    cubin = f"{job.name}.cubin"
    atomic_write_bytes(out / cubin, built.cubin)
    per_elem = 6 * nq * nq if family == "surface_flux" else nq**3
    work = f"cdiv(ne * {per_elem}, 2)" if family in _PAIRED else f"ne * {per_elem}"
    return {
        "symbol": built.symbol(job.name), "cubin": cubin, "sha256": "", "block": [block, 1, 1],
        "dynamic_smem": 0, "params": [{"name": p.name, "ctype": p.ctype} for p in SIGNATURES[family]],
        "grid_rule": {"x": f"min(max(cdiv({work}, {block}), 1), sms * 16)"}, "arch": job.arch,
        "config": {"kind": "support", "order": job.order, "family": family, "nq": nq},
    }


def _compile_fused(job: BuildJob, out: Path) -> dict:
    """One kernel of a fused schedule: the same source the path compiles at run time (the plan
    rendered it from the same schedule a moment ago; its sha256 is the job's key)."""
    from composer.fused.builder import OPTIONS, face_source, kernel_sources, source_sha
    from composer.fused.config import fused_config
    from composer.runtime.nvrtc import compile_cuda

    order, kernel, nq = job.order, job.spec["kernel"], job.order + 1
    variant, mma, volume = None, None, None
    if kernel == "face":
        k = face_source(nq)
        grid = f"min(max(cdiv(ne * {6 * nq * nq}, {k.threads}), 1), sms * 16)"
    else:
        variant = job.spec["variant"]
        config = fused_config(variant, order)
        mma, volume = config.mma, config.volume
        k = next(s for s in kernel_sources(config, job.arch) if s.index == kernel)
        epb = config.elements_per_block
        grid = f"cdiv(ne, {epb}) * {k.blocks_per_element}" if epb > 1 else f"ne * {k.blocks_per_element}"
        if config.trace_cluster > 1:  # whole clusters of elements (composer.paths.fused.launch_grid)
            grid = f"cdiv(ne, {config.trace_cluster}) * {config.trace_cluster}"
        if config.x_pairs:  # two x-neighbour elements per block (the path refuses an odd count)
            grid = "ne / 2"
    if source_sha(k.source) != job.spec["source_sha"]:
        raise BuildError(f"{job.name}: the schedule or template changed while building; run the build again")
    built = compile_cuda(k.source, f"{job.name}.cu", arch=job.arch, options=OPTIONS, entry_points=[job.name])
    if k.persistent:  # the resident blocks per SM of the compiled kernel, on every SM the launch has
        from composer.arch.limits import arch_limits, resident_blocks
        from composer.arch.sass import inspect_cubin

        registers = next(iter(inspect_cubin(built.cubin).values())).registers
        grid = f"min(ne * {k.blocks_per_element}, sms * {resident_blocks(arch_limits(job.arch), k.threads, k.smem_bytes, registers)})"
    cubin = f"{job.name}.cubin"
    atomic_write_bytes(out / cubin, built.cubin)
    return {
        "symbol": built.symbol(job.name), "cubin": cubin, "sha256": "", "block": [k.threads, 1, 1],
        "dynamic_smem": k.smem_bytes, "params": [{"name": p.name, "ctype": p.ctype} for p in k.signature],
        "grid_rule": {"x": grid}, "arch": job.arch,
        "config": {"kind": "fused", "order": order, "variant": variant, "kernel": kernel,
                   "mma": mma, "volume": volume, "source_sha": job.spec["source_sha"],
                   **({"cluster": k.cluster} if k.cluster > 1 else {})},
    }


_COMPILERS: dict[str, Callable[[BuildJob, Path], dict]] = {"cute": _compile_cute, "nvrtc": _compile_nvrtc,
                                                           "fused": _compile_fused}


def existing_entries(out: Path) -> dict[str, KernelEntry]:
    """Manifest entries by job name ({} when there is no readable manifest)."""
    try:
        entries = read_manifest(out / MANIFEST, verify=False)
    except ManifestError:
        return {}
    return {e.config.get("job", e.symbol): e for e in entries}


def build(jobs: list[BuildJob], out: Path | str, force: bool = False,
          log: Callable[[str], None] | None = None) -> BuildReport:
    """Compile the jobs that are not up to date into ``out`` and rewrite its manifest."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    report = BuildReport(manifest=out / MANIFEST)
    entries = existing_entries(out)
    versions: dict[str, dict[str, str]] = {}
    for job in jobs:
        compiler = versions.setdefault(job.kind, _compiler_versions(job.kind))
        reason = "forced" if force else _stale_reason(job, entries.get(job.name), out, compiler)
        if not reason:
            report.reused.append(job.name)
            continue
        if log:
            log(f"compile {job.name} ({job.kind}, {job.arch}): {reason}")
        try:
            raw = _COMPILERS[job.kind](job, out)
        except ComposerError:
            raise
        except Exception as exc:  # the DSL and NVRTC raise many types; name the kernel
            raise BuildError(f"{job.name} ({job.kind}, {job.arch}): {exc}") from exc
        raw["config"].update({"job": job.name, "build_key": job.key})
        raw["compiler"] = compiler
        raw["sha256"] = file_sha256(out / raw["cubin"])
        entries[job.name] = entry_from_dict(raw, f"{job.name}", base_dir=out)
        report.built.append(job.name)
        report.reasons[job.name] = reason
    write_manifest(out / MANIFEST, list(entries.values()))
    report.seconds = time.perf_counter() - t0
    return report

