"""``composer inspect``: DMMA shapes/counts, DFMA, registers, spills, shared memory and global stores
per kernel; for a build directory, each GEMM epilogue tree and the check that a tree GEMM stores
only its output (what the plain GEMM of the same mainloop stores)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from composer.cli import output
from composer.errors import CheckFailed, ComposerError
from composer.arch.hotloop import HotLoop, hot_loop
from composer.arch.sass import KernelSass, check_expected, disassemble, function_sass, parse_cuobjdump
from composer.runtime.manifest import read_manifest

MANIFEST = "manifest.json"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "inspect", help="disassemble CUBINs: DMMA shapes, DFMA, registers, spills, shared memory",
        description="Report per kernel of a CUBIN or of a build directory (its manifest.json) the "
        "DMMA instructions by shape, DFMA count, registers, local memory (spills) and shared memory. "
        "With --expect (or, for a build directory, the MMA shape each GEMM and tensor-core fused kernel "
        "was built with) check that the SASS issues the right DMMA shape; exit 1 on a mismatch.")
    parser.add_argument("target", nargs="?", default="build", metavar="BUILD_DIR|CUBIN")
    parser.add_argument("--expect", default=None, metavar="SHAPE",
                        help="PTX MMA shape every kernel must issue (e.g. 16x8x4)")
    parser.add_argument("--no-spills", action="store_true", help="treat local memory as a failure")
    parser.add_argument("--hot-loop", action="store_true",
                        help="also report each kernel's hot loop (the innermost loop holding its DMMA/DFMA): "
                             "instructions, MMAs, instructions per MMA, shared loads, async copies, "
                             "nested loops")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.set_defaults(func=run)


def collect(target: Path, expect: str | None, allow_spills: bool = True, loops: bool = False
            ) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows (one per kernel) and problems for a CUBIN file or a build directory; with ``loops``
    each row also carries its kernel's hot loop (``hot_loop``, None without a DMMA/DFMA loop).
    Without ``allow_spills`` every kernel with local memory is a problem, whether or not its DMMA
    shape is checked."""
    rows: list[dict[str, Any]] = []
    problems: list[str] = []

    def read(path: Path) -> tuple[dict[str, KernelSass], dict[str, HotLoop | None]]:
        if not path.is_file():
            raise ComposerError(f"{path}: no such CUBIN")
        text = disassemble(path)
        kernels = parse_cuobjdump(text)
        found = {k: hot_loop(s) for k, s in function_sass(text).items()} if loops else {}
        return kernels, {k: (h if h.mma else None) for k, h in found.items()}

    if target.is_dir():
        entries = read_manifest(target / MANIFEST, verify=True)
        by_job: dict[str, tuple[Any, dict[str, KernelSass]]] = {}
        for entry in entries:
            kernels, hot = read(entry.cubin_path)
            by_job[entry.config.get("job", entry.symbol)] = (entry, kernels)
            mma = expect or entry.config.get("mma")
            for key, k in kernels.items():
                rows.append(_row(k, entry.cubin, entry.dynamic_smem, entry.config.get("mma"), hot, key,
                                 _epilogue_text(entry.config)))
                rows[-1]["cluster"] = int(entry.config.get("cluster", 1))  # blocks per thread-block cluster
            if mma and _issues_dmma(entry.config):
                per = {entry.symbol: entry.config["mma_per_ktile"]} if "mma_per_ktile" in entry.config \
                    and not expect else None
                problems += check_expected(kernels, mma, mma_per_kernel=per)
        problems += _extra_stores(by_job.values())
    elif target.is_file():
        kernels, hot = read(target)
        rows = [_row(k, target.name, None, None, hot, key) for key, k in kernels.items()]
        if expect:
            problems = check_expected(kernels, expect)
    else:
        raise ComposerError(f"{target}: no such build directory or CUBIN")
    if not allow_spills:
        problems += [f"{r['name']} ({r['arch']}): {r['spill_bytes']} bytes of local memory per thread "
                     f"({r['local_stores']} STL, {r['local_loads']} LDL): register spills"
                     for r in rows if r["spill_bytes"]]
    return rows, problems


def _epilogue_text(config: dict[str, Any]) -> str | None:
    """A CuTe GEMM's epilogue: "store" or its epilogue tree's text (None for other kernels)."""
    if config.get("kind") != "cute_gemm":
        return None
    epilogue = config.get("epilogue", "store")
    return epilogue["text"] if isinstance(epilogue, dict) else str(epilogue)


def _extra_stores(built: Any) -> list[str]:
    """A GEMM with an epilogue tree must store exactly what the plain GEMM of its mainloop stores
    (the carrier writes dqdt, never its own derivative): compared where the directory holds both."""
    plain = {}
    for entry, kernels in built:
        c = entry.config
        if _epilogue_text(c) == "store":
            plain[(c["order"], c["role"], c["mma"], entry.arch, json.dumps({**c["gemm"], "epilogue": "tree"},
                                                                          sort_keys=True))] = kernels
    problems = []
    for entry, kernels in built:
        c = entry.config
        if _epilogue_text(c) in (None, "store"):
            continue
        base = plain.get((c["order"], c["role"], c["mma"], entry.arch, json.dumps(c["gemm"], sort_keys=True)))
        if base is None:
            continue
        (k,), (b,) = kernels.values(), base.values()
        if k.global_stores != b.global_stores:
            problems.append(f"{k.name} ({entry.arch}): global stores {k.global_stores}, its mainloop's plain GEMM "
                            f"stores {b.global_stores}: the epilogue writes more than its output")
    return problems


def _issues_dmma(config: dict[str, Any]) -> bool:
    """Kernels of a build directory that must issue their MMA shape: the CuTe GEMMs and the
    volume kernels of FUSED_TC / FUSED_TC16 (not the support and face kernels, nor FUSED_DFMA)."""
    if config.get("kind") == "cute_gemm":
        return True
    return (config.get("kind") == "fused" and config.get("variant") in ("FUSED_TC", "FUSED_TC16")
            and config.get("kernel") != "face")


def _row(k: KernelSass, cubin: str, dynamic_smem: int | None, mma: str | None,
         hot: dict[str, HotLoop | None], key: str, epilogue: str | None = None) -> dict[str, Any]:
    row = k.to_dict()
    row.update(cubin=cubin, dynamic_smem=dynamic_smem, built_mma=mma, epilogue=epilogue)
    if key in hot:
        loop = hot[key]
        row["hot_loop"] = None if loop is None else {
            "instructions": loop.instructions, "mma": loop.mma,
            "instructions_per_mma": round(loop.instructions / loop.mma, 2), "lds": loop.counts.get("LDS", 0),
            "ldgsts": loop.counts.get("LDGSTS", 0), "ldg": loop.counts.get("LDG", 0),
            "nested_loops": loop.inner_loops}
    return row


def spilling(rows: list[dict[str, Any]]) -> list[str]:
    """``name (N B/thread)`` of every kernel with local memory (where ptxas spills registers)."""
    return [f"{r['name']} ({r['spill_bytes']} B/thread)" for r in rows if r["spill_bytes"]]


def run(args: argparse.Namespace) -> int:
    rows, problems = collect(Path(args.target), args.expect, not args.no_spills, args.hot_loop)
    spills = spilling(rows)
    if args.json:
        print(json.dumps({"kernels": rows, "problems": problems,
                          "spills": [r["name"] for r in rows if r["spill_bytes"]]}, indent=2))
    else:
        render(rows, problems, spills, output.console())
    if problems:
        raise CheckFailed(f"{len(problems)} problem{'s' if len(problems) > 1 else ''}: {problems[0]}"
                          + (" (and more above)" if len(problems) > 1 else ""))
    return 0


def render(rows: list[dict[str, Any]], problems: list[str], spills: list[str], console: Console) -> None:
    loops = any("hot_loop" in r for r in rows)
    columns = ["kernel", "arch", "DMMA", "DFMA", "regs", "local B", "smem B", "dyn smem B", "STG"]
    clusters = any(r.get("cluster", 1) > 1 for r in rows)
    if clusters:
        columns.append("cluster")
    if loops:
        columns += ["loop instr", "per MMA", "LDS", "LDGSTS", "nested"]
    table = output.table(columns, title="SASS per kernel", right=set(columns) - {"kernel", "DMMA"})
    for r in rows:
        dmma = ", ".join(f"{n} x {s}" for s, n in r["dmma"].items()) or "-"
        cells = [r["name"], r["arch"], dmma, str(r["dfma"]), str(r["registers"]), str(r["spill_bytes"]),
                 str(r["shared_bytes"]), "-" if r["dynamic_smem"] is None else str(r["dynamic_smem"]),
                 " ".join(f"{n}x{bits}b" for bits, n in r.get("global_stores", {}).items()) or "-"]
        if clusters:
            cells.append(str(r.get("cluster", 1)))
        if loops:
            h = r.get("hot_loop")
            cells += ["-"] * 5 if h is None else [
                str(h["instructions"]), f"{h['instructions_per_mma']:.2f}", str(h["lds"]), str(h["ldgsts"]),
                str(h["nested_loops"])]
        table.add_row(*cells)
    console.print(table)
    for r in rows:
        if r.get("epilogue") not in (None, "store"):
            console.print(f"{r['name']}: epilogue {r['epilogue']}", soft_wrap=True)
    for p in problems:
        console.print(f"[red]FAIL[/red] {p}", soft_wrap=True)
    if spills:
        console.print(f"{len(spills)} of {len(rows)} kernels spill to local memory: {', '.join(spills)}",
                      soft_wrap=True)
    else:
        console.print(f"no kernel spills to local memory ({len(rows)} kernel{'' if len(rows) == 1 else 's'})")
    if not problems:
        console.print("[green]all checks passed[/green]")
