"""Synthetic inputs of the model tests: raw ncu CSVs with the model's metrics, profile directories,
cross-compiled build directories of tiny NVRTC kernels with known DMMA shapes, bench summaries.

Numbers are chosen so that demands, eta and predictions can be computed by hand in the tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from composer.arch.mma import mma_shape
from composer.runtime import compile_cuda
from composer.runtime.manifest import file_sha256, write_manifest

REPO = Path(__file__).resolve().parents[1]
MACHINES_FILE = REPO / "schedules" / "machines.toml"
CLOCK_HZ = 1.98e9  # the H200's boost clock: profiles "run" at it, so eta reads cleanly


@pytest.fixture(autouse=True)
def worktree_machines(monkeypatch):
    """Read this tree's machine table (an editable install may package another checkout's); a test
    module that imports it gets it for every test."""
    monkeypatch.setenv("COMPOSER_MACHINES", str(MACHINES_FILE))


@pytest.fixture(scope="module")
def nvrtc_cache(tmp_path_factory):
    """A per-module NVRTC cache directory for the tiny kernels of ``write_build``."""
    return tmp_path_factory.mktemp("nvrtc")


def kernel_row(name: str, *, dmma: float = 0.0, fp64: float = 0.0, issue: float = 1e6, alu: float = 1e5,
               fma: float = 1e5, lsu: float = 1e6, l2: float = 1e8, dram: float = 1e8, cycles: float = 1e6,
               grid: int = 1056, block: int = 256, registers: int = 128, budget: float | None = None,
               clock_hz: float = CLOCK_HZ) -> dict[str, str]:
    """One raw-page row; ``cycles`` are the elapsed SM cycles (the duration is cycles / clock)."""
    row = {
        "Kernel Name": name, "Block Size": f"({block}, 1, 1)", "Grid Size": f"({grid}, 1, 1)",
        "sm__inst_executed_pipe_tensor_op_dmma.sum": f"{dmma:,.0f}",
        "sm__inst_executed_pipe_fp64.sum": f"{fp64:,.0f}", "sm__inst_executed.sum": f"{issue:,.0f}",
        "sm__inst_executed_pipe_alu.sum": f"{alu:,.0f}", "sm__inst_executed_pipe_fma.sum": f"{fma:,.0f}",
        "l1tex__data_pipe_lsu_wavefronts.sum": f"{lsu:,.0f}", "lts__t_bytes.sum": f"{l2:,.0f}",
        "dram__bytes.sum": f"{dram:,.0f}", "gpu__time_duration.sum": f"{cycles / clock_hz * 1e9:.6f}",
        "sm__cycles_elapsed.avg.per_second": f"{clock_hz:.1f}", "launch__grid_size": str(grid),
        "launch__block_size": str(block), "launch__registers_per_thread": str(registers),
        "launch__sm_count": "132",
    }
    if budget is not None:
        row["sm__pipe_shared_cycles_active.sum"] = f"{budget * 4:,.0f}"  # sub-partition cycles
    return row


def raw_csv(rows: list[dict[str, str]]) -> str:
    """ncu's ``--csv --page raw`` layout: ==PROF== lines, header, units row, one row per launch."""
    names = list(dict.fromkeys(k for r in rows for k in r))  # every metric any row has
    header = ["ID", "Process ID", *names]

    def line(values: list[str]) -> str:
        return ",".join(f'"{v}"' for v in values)

    units = ["" for _ in header]
    body = [line([str(i), "1", *(r.get(k, "") for k in names)]) for i, r in enumerate(rows)]
    return "\n".join(["==PROF== Connected to process 1", line(header), line(units), *body]) + "\n"


def write_profile(directory: Path, path: str, order: int, rows: list[dict[str, str]],
                  sms: int | None = None) -> Path:
    """``composer profile --out`` layout: PATH-pORDER.csv and profile.json."""
    directory.mkdir(parents=True, exist_ok=True)
    file = directory / f"{path}-p{order}.csv"
    file.write_text(raw_csv(rows))
    summary_file = directory / "profile.json"
    summary = json.loads(summary_file.read_text()) if summary_file.exists() else {}
    entry = {"path": path, "order": order, "kernels": []}
    if sms is not None:
        entry["sms"] = {"requested": sms, "active": sms}
    summary[f"{path}@p{order}"] = entry
    summary_file.write_text(json.dumps(summary))
    return file


def mma_source(name: str, shape: str, n_mma: int = 3) -> str:
    """A kernel ``name`` issuing ``n_mma`` dependent mma.sync of ``shape`` (or none when shape is None)."""
    if shape is None:
        return f'extern "C" __global__ void {name}(double* p) {{ p[threadIdx.x] *= 2.0; }}\n'
    s = mma_shape(shape)
    outs = ", ".join(f"%{i}" for i in range(s.c_regs))
    a = ", ".join(f"%{s.c_regs + i}" for i in range(s.a_regs))
    b = ", ".join(f"%{s.c_regs + s.a_regs + i}" for i in range(s.b_regs))
    cons = ", ".join(f'"+d"(d[{i}])' for i in range(s.c_regs))
    ins = ", ".join([f'"d"(p[{i}])' for i in range(s.a_regs)] + [f'"d"(p[{i + 8}])' for i in range(s.b_regs)])
    return f"""
extern "C" __global__ void {name}(double* p) {{
  double d[{s.c_regs}] = {{}};
  #pragma unroll
  for (int r = 0; r < {n_mma}; ++r)
    asm volatile("mma.sync.aligned.{s.ptx}.row.col.f64.f64.f64.f64 {{{outs}}}, {{{a}}}, {{{b}}}, {{{outs}}};"
                 : {cons} : {ins});
  #pragma unroll
  for (int i = 0; i < {s.c_regs}; ++i) p[threadIdx.x * {s.c_regs} + i] = d[i];
}}
"""


def write_build(directory: Path, arch: str, kernels: dict[str, str | None], cache: Path,
                config: dict[str, dict] | None = None) -> Path:
    """A build directory (manifest.json + one CUBIN per kernel) whose kernels issue the given PTX
    shapes (None: no mma); ``config`` adds manifest config per kernel (e.g. its build ``mma``)."""
    directory.mkdir(parents=True, exist_ok=True)
    entries = []
    for name, shape in kernels.items():
        built = compile_cuda(mma_source(name, shape), f"{name}.cu", arch=arch, cache_dir=cache, entry_points=[name])
        (directory / f"{name}.cubin").write_bytes(built.cubin)
        entries.append({"symbol": built.symbol(name), "cubin": f"{name}.cubin",
                        "sha256": file_sha256(directory / f"{name}.cubin"), "block": [32, 1, 1],
                        "dynamic_smem": 0, "params": [{"name": "p", "ctype": "ptr"}], "grid_rule": {"x": 1},
                        "arch": arch, "config": {"mma": shape, **(config or {}).get(name, {})}})
    write_manifest(directory / "manifest.json", entries)
    return directory


def write_bench(directory: Path, seconds: dict[tuple[str, int], float], sms: int | None = None) -> Path:
    """A bench results directory holding only what scoring reads (summary.json)."""
    directory.mkdir(parents=True, exist_ok=True)
    options = {"graph": False, **({"sms": sms} if sms is not None else {})}
    summaries = [{"path": p, "order": o, "options_key": json.dumps(options, sort_keys=True, separators=(",", ":")),
                  "stats": {"device_per_call_s": {"median": t}, "stage_wall_s": {"median": t * 1.05}}}
                 for (p, o), t in seconds.items()]
    (directory / "summary.json").write_text(json.dumps({"schema": "x", "summaries": summaries}))
    return directory


def ratio_prediction(sms: int, ratio: float, paths: tuple[str, str] = ("FUSED", "FUSED_TC"), order: int = 31) -> dict:
    """A hashed prediction document for one target of ``sms`` SMs whose first path takes ``ratio`` times
    the second's time (1 ms): the smallest input `composer model score` turns into one ratio."""
    from composer.model.calibrate import content_hash
    from composer.model.predict import SCHEMA, VERSION

    body = {"schema": SCHEMA, "version": VERSION, "model_hash": "m",
            "target": {"label": f"h200@{sms}", "sm_count": sms, "full_sm_count": 132},
            "paths": [{"path": paths[0], "order": order, "seconds": ratio * 1e-3, "kernels": []},
                      {"path": paths[1], "order": order, "seconds": 1e-3, "kernels": []}]}
    return {**body, "hash": content_hash(body)}


def ratio_cells(measured: dict[int, float], paths: tuple[str, str] = ("FUSED", "FUSED_TC"), order: int = 31) -> list:
    """Measured cells of the same two paths per SM count, the first ``measured[sms]`` times the second."""
    from composer.model.measured import MeasuredCell

    return [MeasuredCell(path, order, sms, t, "t") for sms, r in measured.items()
            for path, t in ((paths[0], r * 1e-3), (paths[1], 1e-3))]


def ratios_by_target(result: dict) -> dict:
    """A score's ratios keyed by target label (one ratio per target in these inputs)."""
    return {r["target"]: r for r in result["ratios"]}


def write_ratio_files(directory: Path, predicted: dict[int, float], measured: dict[int, float]
                      ) -> tuple[list[str], list[str]]:
    """The files `composer model score` reads for the FUSED/FUSED_TC ratio at p = 31: one prediction
    file per SM count of ``predicted`` (:func:`ratio_prediction`) and one bench directory per SM count
    of ``measured`` (FUSED_TC at 1 ms, FUSED at the ratio)."""
    preds = []
    for sms, r in predicted.items():
        path = directory / f"p{sms}.json"
        path.write_text(json.dumps(ratio_prediction(sms, r)))
        preds.append(str(path))
    benches = [str(write_bench(directory / f"b{sms}", {("FUSED", 31): r * 1e-3, ("FUSED_TC", 31): 1e-3}, sms=sms))
               for sms, r in measured.items()]
    return preds, benches
