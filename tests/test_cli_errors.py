"""The CLI contract of every subcommand: one stderr line per failure and the right exit status,
output that survives pipes, validate's verdicts, build's MMA defaults (composer/cli/main.py).

All CPU and fast: bad input fails before any GPU work or long computation; the few builds and the
SASS inspection compile single kernels through NVRTC.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from composer import dg
from composer.cli.main import main
from composer.errors import ComposerError
from composer.runtime import gpu_available

ROOT = Path(__file__).resolve().parents[1]
NO_GPU = not gpu_available()
needs_no_gpu = pytest.mark.skipif(not NO_GPU, reason="checks the message of a machine without a GPU")
SSP_RK2 = ((0.0, 1.0), (0.5, 0.5))  # Shu-Osher SSP-RK2: a genuine second-order method


def run_cli(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def assert_one_line(err: str, prefix: str = "error: ") -> None:
    assert "Traceback" not in err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert err.startswith(prefix), err


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("COMPOSER_DEBUG", None)
    env.update(extra)
    return env


def composer(*args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "composer", *args], capture_output=True, text=True,
                          env=subprocess_env(**extra_env), cwd=ROOT, timeout=300)


@pytest.fixture()
def corrupt_build_dir(tmp_path: Path) -> Path:
    (tmp_path / "manifest.json").write_text("{not json")
    return tmp_path


BAD_INPUT = [
    # (argv, fragment of the message); every one exits 2
    (["info", "--order", "0"], "argument --order/-p: expected a positive integer"),
    (["info", "--order", "8"], "no schedule for order 8"),
    (["info", "--order", "7", "--grid", "0"], "argument --grid"),
    (["info", "--order", "7", "--grid", "1,2"], "argument --grid"),
    (["info", "--order", "7", "--reserve", "nan"], "argument --reserve"),
    (["info", "--order", "7", "--machine", "nope"], "unknown machine 'nope'"),
    (["validate", "--order", "7", "--nstep", "0"], "argument --nstep: expected a positive integer"),
    (["validate", "--order", "7", "--nstep", "-3"], "argument --nstep"),
    (["validate", "--order", "7", "--dt", "0"], "argument --dt: expected a finite number > 0"),
    (["validate", "--order", "7", "--dt", "-0.01"], "argument --dt"),
    (["validate", "--order", "7", "--dt", "nan"], "argument --dt"),
    (["validate", "--order", "7", "--dt", "inf"], "argument --dt"),
    (["validate", "--order", "7", "--grid", "2,0,2"], "argument --grid"),
    (["validate", "--order", "-1"], "argument --order"),
    (["validate", "--backend", "NOPE", "--order", "7"], "unknown path 'NOPE'"),
    (["bench", "--rounds", "0"], "argument --rounds: expected a positive integer"),
    (["bench", "--orders", "7,0"], "argument --orders"),
    (["bench", "--orders", "8"], "no schedule for orders [8]"),
    (["bench", "--option", "GEMM_CUTE.mma"], "expected PATH.KEY=VALUE"),
    (["build", "--arch", "sm_91", "--orders", "7"], "cannot compile for sm_91"),
    (["build", "--arch", "sm_91", "--orders", "7", "--paths", "FUSED"], "NVRTC cannot compile for sm_91"),
    (["build", "--arch", "gfx90a", "--orders", "7"], "arch must look like 'sm_90'"),
    (["build", "--arch", "sm_90", "--mma", "9x9x9", "--orders", "7"], "unknown FP64 MMA shape '9x9x9'"),
    (["build", "--arch", "sm_90", "--paths", "NOPE", "--orders", "7"], "no kernels for ['NOPE']"),
    (["build", "--arch", "sm_90", "--orders", "8"], "no schedule for order 8"),
    (["build", "--arch", "sm_90", "--orders", "0"], "argument --orders"),
    (["build", "--arch", "sm_80", "--orders", "7"], "use --mma 8x8x4 for sm_80"),
    (["sweep-library", "--order", "7", "--rounds", "0"], "argument --rounds"),
    (["sweep-library", "--order", "7", "--calls", "nan"], "argument --calls"),
    (["sweep-library", "--order", "8", "--dry-run"], "no schedule for order 8"),
    (["sweep-carrier", "--order", "8", "--dry-run"], "no schedule for order 8"),
    (["sweep-library", "--order", "7", "--mma", "1x1x1", "--dry-run"], "unknown FP64 MMA shape"),
    (["sweep-fused"], "the following arguments are required: STEP"),
    (["sweep-fused", "check", "--orders", "7", "--workers", "0"], "argument --workers"),
    (["sweep-fused", "check", "--orders", "7", "--subset", "nope"], "unknown subset 'nope'"),
    (["sweep-fused", "check", "--orders", "7", "--subset", "stream_copies,nope"], "unknown subset 'nope'"),
    (["sweep-fused", "check", "--orders", "7", "--subset", "all,stream_copies"], 'subset "all" cannot be joined'),
    (["sweep-fused", "check", "--orders", "7", "--only", "("], "--only '(': not a regular expression"),
    (["sweep-fused", "check", "--orders", "7", "--max-spill", "-1"], "argument --max-spill: expected an integer >= 0"),
    (["sweep-fused", "run", "--orders", "7", "--plan", "p.json", "--out", "o", "--budget", "-1"],
     "argument --budget"),
    (["sweep-fused", "apply", "missing.json"], "no such sweep log"),
    (["sweep-fused", "apply", "x.json", "--min-gain", "inf"], "argument --min-gain"),
    # a percent where a fraction is meant (sessions 32-34 passed 1 for 1 %, which asked for a 100 % gain)
    (["sweep-fused", "apply", "x.json", "--min-gain", "1"], "expected a fraction in [0, 1), got '1'"),
    (["profile", "--paths", "FUSED", "--orders", "7", "--grid", "0"], "argument --grid"),
    (["profile", "--paths", "FUSED", "--orders", "7", "--timeout", "nan"], "argument --timeout"),
    (["profile", "--paths", "NOPE", "--orders", "7"], "unknown path 'NOPE'"),
    (["profile", "--paths", "FUSED", "--orders", "6"], "does not implement order 6"),
    (["graph", "--path", "NOPE", "--order", "7"], "unknown path 'NOPE'"),
    (["graph", "--path", "GEMM", "--order", "7", "--max-streams", "0"], "argument --max-streams"),
    (["graph", "--path", "FUSED", "--order", "511"], "does not implement order 511"),
    (["model", "prices", "--machine", "nope"], "unknown machine 'nope'"),
    (["model", "fit", "--profiles", "/nonexistent", "--out", "m.json"], "no such profile directory"),
    (["model", "predict", "--model", "/nonexistent.json", "--machine", "h200", "--build", "."], "no such file"),
    (["model", "score", "--predictions", "/nonexistent.json", "--measured", "."], "no such file"),
    (["model", "score", "--predictions", "p.json", "--measured", ".", "--resolution-floor", "-1"],
     "--resolution-floor -1.0: expected a percentage >= 0"),
    (["report", "/nonexistent", "--out", "r"], "no such file or directory"),
    (["campaign", "--out", "c", "--budget-s", "0"], "argument --budget-s"),
    (["campaign", "--out", "c", "--axes", "nope"], "unknown axes ['nope']"),
    (["campaign", "--out", "/nonexistent", "--write-crossover"], "no results directory and no --predictions"),
    (["profile", "--paths", "FUSED", "--orders", "7", "--replay", "range"], "argument --replay"),
    (["build", "--arch", "sm_90", "--fused-variants", "every"], "argument --fused-variants"),
    (["graph", "--path", "GEMM", "--order", "7", "--record-times"], "--record-times records what --measure timed"),
    (["sweep-carrier", "--order", "9", "--tiles", "--dry-run"], "no schedule for order 9"),
    (["nope"], "invalid choice: 'nope'"),
    ([], "the following arguments are required: COMMAND"),
]


@pytest.mark.parametrize("argv, fragment", BAD_INPUT, ids=[" ".join(a) or "(none)" for a, _ in BAD_INPUT])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, fragment) -> None:
    status, _, err = run_cli(capsys, argv)
    assert status == 2, err
    assert_one_line(err)
    assert fragment in err


def test_missing_or_corrupt_build_directory(capsys, tmp_path, corrupt_build_dir) -> None:
    for target, fragment in ((tmp_path / "absent", "no such build directory or CUBIN"),
                             (corrupt_build_dir, "manifest.json: invalid JSON")):
        status, _, err = run_cli(capsys, ["inspect", str(target)])
        assert status == 2 and fragment in err
        assert_one_line(err)
    empty = tmp_path / "empty"
    empty.mkdir()
    status, _, err = run_cli(capsys, ["inspect", str(empty)])
    assert status == 2 and "manifest not found" in err
    assert_one_line(err)


def test_malformed_toml_is_one_line(capsys, tmp_path) -> None:
    machines = tmp_path / "machines.toml"
    machines.write_text("[machines.x\n")
    status, _, err = run_cli(capsys, ["info", "--order", "7", "--machines-file", str(machines)])
    assert status == 2 and "TOML syntax error" in err and str(machines) in err
    assert_one_line(err)
    sweep_log = tmp_path / "sweep.json"
    sweep_log.write_text("{")
    status, _, err = run_cli(capsys, ["sweep-fused", "apply", str(sweep_log)])
    assert status == 2 and "not a sweep log" in err
    assert_one_line(err)


@needs_no_gpu
@pytest.mark.parametrize("argv", [
    ["validate", "--backend", "GEMM", "--order", "7"],
    ["sweep-library", "--order", "7", "--dry-run"],
    ["bench", "--orders", "7"],
    ["sweep-fused", "run", "--orders", "7", "--plan", "p.json", "--out", "o"],
])
def test_no_gpu_is_one_line_naming_what_works(capsys, argv) -> None:
    status, _, err = run_cli(capsys, argv)
    assert status == 2
    assert_one_line(err)
    assert "GPU" in err


@needs_no_gpu
def test_no_gpu_in_a_subprocess_is_one_line_without_traceback() -> None:
    done = composer("validate", "--backend", "GEMM", "--order", "7")
    assert done.returncode == 2 and done.stdout == ""
    assert_one_line(done.stderr)
    assert "no NVIDIA driver" in done.stderr or "no usable NVIDIA GPU" in done.stderr
    assert "composer validate --backend numpy" in done.stderr


def test_subprocess_bad_numbers_and_arch() -> None:
    for args, fragment in ((("validate", "--order", "7", "--nstep", "0"), "--nstep"),
                           (("build", "--arch", "sm_91", "--orders", "7"), "sm_91")):
        done = composer(*args)
        assert done.returncode == 2, done.stderr
        assert_one_line(done.stderr)
        assert fragment in done.stderr and "KeyError" not in done.stderr


def test_debug_shows_the_traceback() -> None:
    done = composer("build", "--arch", "sm_91", "--orders", "7", COMPOSER_DEBUG="1")
    assert done.returncode == 2
    assert "Traceback" in done.stderr and "PlanError" in done.stderr


def test_unexpected_exception_is_an_internal_error(capsys, monkeypatch) -> None:
    import composer.cli.info as info

    def broken(args: object) -> int:
        raise KeyError("sm_91")

    monkeypatch.setattr(info, "run", broken)
    status, _, err = run_cli(capsys, ["info", "--order", "7"])
    assert status == 3
    assert_one_line(err, "internal error: KeyError")
    assert "COMPOSER_DEBUG=1" in err


def test_a_message_of_several_lines_is_cut_to_one(capsys, monkeypatch) -> None:
    import composer.cli.info as info
    from composer.runtime import CompileError

    def failing(args: object) -> int:
        raise CompileError("k.cu", "sm_90", "k.cu(3): error: x undefined\nk.cu(4): error: y undefined")

    monkeypatch.setattr(info, "run", failing)
    status, _, err = run_cli(capsys, ["info", "--order", "7"])
    assert status == 2
    assert_one_line(err)
    assert "NVRTC failed to compile 'k.cu' for sm_90" in err and "more lines" in err


@pytest.mark.parametrize("name", ["CudaError", "NoGpuError", "OutOfDeviceMemory", "CompileError",
                                  "ManifestError", "LaunchError", "GridRuleError"])
def test_runtime_errors_are_composer_errors(name: str) -> None:
    import composer.runtime as runtime

    cls = getattr(runtime, name)
    assert issubclass(cls, ComposerError)
    builtin = {"OutOfDeviceMemory": MemoryError, "ManifestError": ValueError, "LaunchError": ValueError,
               "GridRuleError": ValueError}.get(name, RuntimeError)
    assert issubclass(cls, builtin)  # callers catching the builtin still catch it


# --- pipes --------------------------------------------------------------------------------------


def test_module_entry_point_help() -> None:
    done = composer("--help")
    assert done.returncode == 0 and "sweep-library" in done.stdout and "Exit status" in done.stdout


@pytest.mark.parametrize("args", [("info", "--order", "7"), ("info", "--order", "7", "--json")])
def test_a_closed_pipe_ends_quietly_with_0(args: tuple[str, ...]) -> None:
    """The reader is gone before the first write: every write gets EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "composer", *args], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, env=subprocess_env(), cwd=ROOT, timeout=300)
    finally:
        os.close(write_end)
    assert done.returncode == 0 and done.stderr == ""


def test_pipe_closed_after_the_first_line() -> None:
    """``composer info --order 7 --json | head -1``: a 4 KiB pipe holds less than the output, so the
    writer is still writing when the reader closes after one line."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(read_end, fcntl.F_SETPIPE_SZ, 4096)  # the JSON report is 16 KiB
    proc = subprocess.Popen([sys.executable, "-m", "composer", "info", "--order", "7", "--json"],
                            stdout=write_end, stderr=subprocess.PIPE, env=subprocess_env(), cwd=ROOT)
    os.close(write_end)
    first = b""
    while not first.endswith(b"\n"):
        first += os.read(read_end, 1)
    os.close(read_end)
    assert proc.wait(timeout=300) == 0
    assert proc.stderr is not None and proc.stderr.read() == b""
    assert first == b"{\n"


def test_head_with_pipefail() -> None:
    done = subprocess.run(["bash", "-c", f"set -o pipefail; {sys.executable} -m composer info --order 7 | head -1"],
                          capture_output=True, text=True, env=subprocess_env(), cwd=ROOT, timeout=300)
    assert done.returncode == 0 and done.stderr == "" and done.stdout.count("\n") == 1


def test_piped_tables_keep_whole_names(capsys) -> None:
    assert main(["info", "--order", "511"]) == 0
    out = capsys.readouterr().out
    assert "FUSED_DFMA (stream)" in out and "FUSED_TC16 (stream)" in out and "…" not in out
    done = composer("info", "--order", "511")
    assert done.returncode == 0 and "FUSED_DFMA (stream)" in done.stdout and "…" not in done.stdout


def test_inspect_table_and_spill_summary_keep_whole_names(capsys) -> None:
    from composer.cli import output
    from composer.cli.inspect import render, spilling

    long_name = "dgemm_p0127_x_m16_8_4_with_a_name_long_enough_to_be_cut_in_80_columns"
    rows = [{"name": long_name, "arch": "sm_90", "dmma": {"16x8x4": 1234567}, "dfma": 0, "registers": 255,
             "spill_bytes": 4096, "shared_bytes": 0, "dynamic_smem": 101376,
             "hot_loop": {"instructions": 10987654, "instructions_per_mma": 12.34, "lds": 1, "ldgsts": 2,
                          "nested_loops": 0}},
            {"name": "fused_p7_k0_xyz", "arch": "sm_90", "dmma": {}, "dfma": 48, "registers": 40,
             "spill_bytes": 0, "shared_bytes": 0, "dynamic_smem": None}]
    render(rows, [], spilling(rows), output.console())
    out = capsys.readouterr().out
    assert long_name in out and "10987654" in out and "1234567 x 16x8x4" in out and "…" not in out
    assert f"1 of 2 kernels spill to local memory: {long_name} (4096 B/thread)" in out


def test_inspect_names_a_spilling_kernel_of_a_cubin(capsys, tmp_path) -> None:
    from composer.runtime import compile_cuda

    source = r"""
extern "C" __global__ void spills_a_local_array(const double* a, double* c, int k) {
  double buf[64];
  for (int i = 0; i < 64; ++i) buf[i] = a[i * blockDim.x + threadIdx.x];
  c[threadIdx.x] = buf[k & 63] + buf[(k * 7) & 63];
}
"""
    cubin = tmp_path / "spill.cubin"
    cubin.write_bytes(compile_cuda(source, "spill.cu", arch="sm_90", entry_points=["spills_a_local_array"],
                                   cache_dir=tmp_path).cubin)
    status, out, _ = run_cli(capsys, ["inspect", str(cubin)])
    assert status == 0
    assert "1 of 1 kernels spill to local memory: spills_a_local_array (" in out
    status, out, _ = run_cli(capsys, ["inspect", str(cubin), "--json"])
    assert json.loads(out)["spills"] == ["spills_a_local_array"]
    status, _, err = run_cli(capsys, ["inspect", str(cubin), "--expect", "8x8x4", "--no-spills"])
    assert status == 1
    assert_one_line(err, "failed: 2 problems")


# --- validate's verdict ---------------------------------------------------------------------------


def test_validate_numpy_order_3_passes_with_ratio_near_8(capsys) -> None:
    status, out, err = run_cli(capsys, ["validate", "--backend", "numpy", "--order", "3", "--json"])
    assert status == 0, err
    result = json.loads(out)
    integration = result["integration"]
    assert result["passed"] and 7.8 < integration["convergence_ratio"] < 8.2
    assert {c["name"]: c["passed"] for c in integration["criteria"]} == {
        "finite": True, "temporal convergence": True, "mass conservation": True}


def test_validate_fails_a_second_order_integrator(capsys, monkeypatch) -> None:
    """The same command with SSP-RK2's stages in place of SSP-RK3's: ratio 4, exit 1."""
    import composer.dg.timeint as timeint

    monkeypatch.setattr(timeint, "RK3_STAGES", SSP_RK2)
    status, out, err = run_cli(capsys, ["validate", "--backend", "numpy", "--order", "3", "--json"])
    assert status == 1
    assert_one_line(err, "failed: validate --backend numpy --order 3: temporal convergence: ratio 4.")
    integration = json.loads(out)["integration"]
    assert 3.5 < integration["convergence_ratio"] < 4.5 and not integration["passed"]


def test_validate_table_states_the_verdict(capsys) -> None:
    status, out, _ = run_cli(capsys, ["validate", "--order", "2"])  # no schedule for p = 2: derived defaults
    assert status == 0
    assert "verdict" in out and "temporal convergence" in out and "FAIL" not in out


def test_validate_too_small_a_dt_is_unresolved_not_a_pass(capsys) -> None:
    status, _, err = run_cli(capsys, ["validate", "--order", "3", "--dt", "1e-6", "--nstep", "2"])
    assert status == 1
    assert_one_line(err, "failed: ")
    assert "unresolved" in err


def test_mass_and_finite_criteria_fail_for_broken_tendencies() -> None:
    from composer.validation import default_integration, integration_check

    s = default_integration(3)

    def with_source(fields, order, grid):  # a constant source adds mass, the time error is unchanged
        return dg.reference_tendency(fields, order, grid) + 1e-6

    verdict = {c.name: c.passed for c in integration_check(with_source, 3, s.grid, s.dt, s.nstep).criteria()}
    assert verdict == {"finite": True, "temporal convergence": True, "mass conservation": False}

    def diverging(fields, order, grid):
        return dg.reference_tendency(fields, order, grid) * np.inf

    check = integration_check(diverging, 3, s.grid, s.dt, s.nstep)
    assert not check.passed and not {c.name: c.passed for c in check.criteria()}["finite"]


def test_stable_step_uses_the_reference_operators_spectral_radius() -> None:
    """The 1-D operator behind the default dt, against reference_tendency on x-only fields (which the
    y and z terms leave alone on a periodic one-element-thick grid)."""
    from composer.validation import spectral_radius_1d

    order, elements = 3, 2
    grid = (elements, 1, 1)
    mesh = dg.Mesh(order, grid)
    fields = dg.make_fields(order, grid)
    nq = order + 1
    columns = []
    for e in range(elements):
        for i in range(nq):
            q = np.zeros(mesh.volume_shape)
            q[e, :, :, i] = 1.0
            out = dg.reference_tendency({**fields, "q": q}, order, grid)
            assert np.allclose(out, out[:, :1, :1, :])  # stays an x-only field
            columns.append(out[:, 0, 0, :].reshape(-1))
    radius = np.max(np.abs(np.linalg.eigvals(np.array(columns).T)))
    assert spectral_radius_1d(order, elements) == pytest.approx(radius, rel=1e-10)


# --- build's MMA defaults -----------------------------------------------------------------------


def test_build_takes_the_mma_shape_from_the_schedules() -> None:
    from composer.build.plan import gemm_cute_mma, plan

    jobs = plan("sm_90", None, [7, 15], ["GEMM_CUTE"])
    shapes = {(j.order, j.spec["config"]["mma"]) for j in jobs if j.kind == "cute"}
    assert shapes == {(7, gemm_cute_mma(7)), (15, gemm_cute_mma(15))}
    assert gemm_cute_mma(7) == "16x8x4"  # what every shipped schedule runs GEMM_CUTE with
    assert {j.spec["config"]["mma"] for j in plan("sm_80", "8x8x4", [7], ["GEMM_CUTE"]) if j.kind == "cute"} \
        == {"8x8x4"}


def test_build_mma_is_not_checked_for_paths_that_do_not_read_it(capsys, tmp_path) -> None:
    status, out, err = run_cli(capsys, ["build", "--arch", "sm_80", "--mma", "16x8x4", "--paths", "FUSED",
                                        "--orders", "7", "--out", str(tmp_path), "--json"])
    assert status == 0, err
    assert "--mma applies to GEMM_CUTE, GEMM_FUSED only" in err
    assert json.loads(out)["built"] == ["fused_p7_k0_xyz"]


# --- the sweep keeps going past a failed run, not past a wrong request ---------------------------


@pytest.mark.parametrize("kind", ["run failure", "wrong request"])
def test_bench_records_a_run_failure_and_stops_on_a_wrong_request(tmp_path, kind) -> None:
    """CudaError became a ComposerError; the sweep still records it against the run (RunFailure)."""
    from composer.bench.results import decode_line
    from composer.runtime import CudaError
    from tests.test_bench_runner_cpu import FAILING_JOB, FakeMeasure, stored_lines, sweep

    failure = (CudaError(700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access", "cuStreamSynchronize")
               if kind == "run failure" else ComposerError("a request the sweep cannot serve"))

    class Failing(FakeMeasure):
        def __call__(self, schedule, path, fields, device, round_index, *rest):
            if (path, schedule.order, round_index) == FAILING_JOB:
                raise failure
            return super().__call__(schedule, path, fields, device, round_index, *rest)

    out = tmp_path / "sweep"
    if kind == "wrong request":
        with pytest.raises(ComposerError, match="cannot serve"):
            sweep(out, Failing(), orders=(FAILING_JOB[1],))
        return
    sweep(out, Failing(), orders=(FAILING_JOB[1],))
    errors = [record.error for record in map(decode_line, stored_lines(out)) if record.error]
    assert errors == ["CudaError: cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal memory access"]
