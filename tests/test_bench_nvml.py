"""NVML sampler and provenance: clean degradation without a GPU, decoding, fake-NVML thread."""

from __future__ import annotations

import json
import os
import subprocess
import time
import types
from pathlib import Path

import pytest

from composer.bench import nvml as nvml_mod
from composer.bench.nvml import (
    ClockSample,
    ClockSampler,
    decode_reasons,
    summarize_samples,
)
from composer.bench.provenance import collect_provenance, nvml_info


class NVMLError(Exception):
    pass


def fake_nvml(*, event_api: bool = True, event_missing: bool = False,
              power_supported: bool = True) -> types.SimpleNamespace:
    """Minimal pynvml stand-in: SM clock drops and the power cap engages after 3 calls."""
    state = {"calls": 0, "init": 0}

    def clock(h, kind):
        if kind == 0:
            state["calls"] += 1
            return 1980 if state["calls"] <= 3 else 1755
        return 2619

    def reasons(h):
        if event_missing:
            raise NVMLError("Function Not Found")
        return 0x4 if state["calls"] > 3 else 0x0

    def power(h):
        if not power_supported:
            raise NVMLError("Not Supported")
        return 650_000

    ns = types.SimpleNamespace(
        NVML_CLOCK_SM=0, NVML_CLOCK_MEM=1, NVML_TEMPERATURE_GPU=0, state=state,
        nvmlInit=lambda: state.__setitem__("init", state["init"] + 1),
        nvmlShutdown=lambda: state.__setitem__("init", state["init"] - 1),
        nvmlDeviceGetHandleByIndex=lambda i: f"h{i}",
        nvmlDeviceGetHandleByUUID=lambda u: f"h:{u}",
        nvmlDeviceGetClockInfo=clock, nvmlDeviceGetPowerUsage=power,
        nvmlDeviceGetEnforcedPowerLimit=lambda h: 700_000,
        nvmlDeviceGetTemperature=lambda h, s: 61,
        nvmlDeviceGetCurrentClocksThrottleReasons=lambda h: 0x40 | 0x20,
    )
    if event_api:
        ns.nvmlDeviceGetCurrentClocksEventReasons = reasons
    return ns


def test_decode_reasons_bitmask():
    assert decode_reasons(0) == ()
    assert decode_reasons(0x4) == ("sw_power_cap",)
    assert decode_reasons(0x4 | 0x8 | 0x40 | 0x1) == (
        "gpu_idle", "sw_power_cap", "hw_slowdown", "hw_thermal_slowdown")
    assert decode_reasons(0x1000) == ("unknown_0x1000",)


def test_reason_table_matches_pynvml_constants():
    pynvml = pytest.importorskip("pynvml")
    for name, value in vars(pynvml).items():
        if name.startswith("nvmlClocksEventReason") and name not in (
                "nvmlClocksEventReasonAll", "nvmlClocksEventReasonNone"):
            assert value in nvml_mod.REASON_BITS, name


def test_sampler_degrades_without_gpu():
    broken = types.SimpleNamespace(nvmlInit=lambda: (_ for _ in ()).throw(
        NVMLError("NVML Shared Library Not Found")))
    s = ClockSampler(nvml=broken)
    assert s.available is False and "Library Not Found" in s.reason
    s.start()
    assert s.stop() == []
    summ = s.summary()
    assert summ.available is False and summ.n_samples == 0 and "nvmlInit" in summ.reason
    s.close()


def test_sampler_real_pynvml_never_raises():
    # On this CPU machine this degrades; on a GPU node it samples. Either way, no raise.
    with ClockSampler(interval_s=0.01) as s:
        available = s.available
        s.start()
        time.sleep(0.03)
        samples = s.stop()
        summ = s.summary()
    if available:  # GPU node
        assert samples and summ.available and summ.sm_clock_mhz_max
    else:  # this CPU machine: explicit reason, no samples
        assert samples == [] and not summ.available and summ.reason


def test_sampler_thread_with_fake_nvml():
    fake = fake_nvml()
    with ClockSampler(interval_s=0.005, nvml=fake) as s:
        assert s.available
        s.start()
        time.sleep(0.08)
        samples = s.stop()
        assert s.stop() == samples  # idempotent
        summ = s.summary()
    assert fake.state["init"] == 0  # NVML released
    assert len(samples) >= 5
    assert samples[0].sm_clock_mhz == 1980 and samples[-1].sm_clock_mhz == 1755
    assert samples[0].power_w == 650.0 and samples[0].power_limit_w == 700.0
    assert all(a.t_s <= b.t_s for a, b in zip(samples, samples[1:], strict=False))
    assert summ.sm_clock_mhz_min == 1755 and summ.sm_clock_mhz_max == 1980
    assert summ.reasons_seen == ("sw_power_cap",)
    assert summ.power_capped_fraction == pytest.approx((len(samples) - 3) / len(samples))
    assert summ.power_w_max == 650.0 and summ.temperature_c_max == 61
    json.dumps(summ.to_dict())


def test_sampler_falls_back_to_throttle_reasons():
    s = ClockSampler(nvml=fake_nvml(event_api=False))
    assert s.sample_once().reasons == ("sw_thermal_slowdown", "hw_thermal_slowdown")
    s2 = ClockSampler(nvml=fake_nvml(event_missing=True))  # new binding, old driver
    assert s2.sample_once().reasons_mask == 0x60
    s.close(), s2.close()


def test_unsupported_field_is_none_not_error():
    s = ClockSampler(device="GPU-1234", nvml=fake_nvml(power_supported=False))
    x = s.sample_once()
    assert x.power_w is None and x.sm_clock_mhz == 1980 and s.errors == 1
    assert "Not Supported" in s.last_error
    s.close()


def test_summary_of_samples_and_roundtrip():
    samples = [ClockSample(0.05 * i, c, 2619, p, 700.0, 60, m, decode_reasons(m))
               for i, (c, p, m) in enumerate([(1980, 500.0, 0), (1900, 699.0, 4),
                                              (1850, 700.0, 4 | 0x40), (None, None, None)])]
    summ = summarize_samples(samples)
    assert summ.sm_clock_mhz_median == 1900 and summ.power_w_max == 700.0
    assert summ.power_capped_fraction == pytest.approx(2 / 3)
    assert summ.thermal_fraction == pytest.approx(1 / 3)
    assert ClockSample.from_dict(json.loads(json.dumps(samples[2].to_dict()))) == samples[2]
    assert summarize_samples([]).n_samples == 0


# -- provenance ----------------------------------------------------------------------------
def _expected_commit() -> str | None:
    """``$COMPOSER_GIT_COMMIT`` (a copied working tree names its commit), else git's HEAD of this
    checkout; None where there is neither (no git, or a copy without .git)."""
    named = os.environ.get("COMPOSER_GIT_COMMIT")
    if named:
        return named
    repo = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True)
    except OSError:
        return None
    return head.stdout.strip() if head.returncode == 0 else None


def test_provenance_never_raises_and_is_json(tmp_path):
    p = collect_provenance()
    json.dumps(p, default=str)
    assert p["date_utc"].endswith("+00:00") and p["python"]
    assert "numpy" in p["packages"] and "nvidia-ml-py" in p["packages"]
    commit = _expected_commit()
    if commit is None:
        assert p["git"] is None and "git" in p["errors"]
    else:
        assert p["git"]["commit"] == commit
    # no GPU here: NVML and the CUDA driver are missing and reported, not raised
    if p["nvml"] is None:
        assert "nvml" in p["errors"]
    q = collect_provenance(repo=tmp_path)  # not a git repository
    assert q["git"] is None and "git" in q["errors"]


def test_provenance_tolerates_failing_nvml_and_reads_fake():
    def explode():
        raise RuntimeError("boom")

    p = collect_provenance(nvml=types.SimpleNamespace(nvmlInit=explode))
    assert p["nvml"] is None and "boom" in p["errors"]["nvml"]
    fake = fake_nvml()
    fake.nvmlSystemGetDriverVersion = lambda: "580.65"
    fake.nvmlSystemGetCudaDriverVersion_v2 = lambda: 13000
    fake.nvmlDeviceGetCount = lambda: 1
    fake.nvmlDeviceGetName = lambda h: b"NVIDIA H200"
    fake.nvmlDeviceGetUUID = lambda h: "GPU-abc"
    info = nvml_info(fake)
    assert info["driver_version"] == "580.65" and info["cuda_driver_version"] == 13000
    g = info["gpus"][0]
    assert g["name"] == "NVIDIA H200" and g["uuid"] == "GPU-abc"
    assert g["enforced_power_limit_w"] == 700.0
    assert g["pci_bus_id"] is None and "gpu0.pci_bus_id" in info["errors"]
    assert fake.state["init"] == 0


def test_git_commit_env_names_the_copied_tree(tmp_path, monkeypatch):
    """A tree copied into a stale checkout (the device tool's) records the commit it was given."""
    import subprocess

    from composer.bench.provenance import COMMIT_ENV, git_info

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "f").write_text("x")
    subprocess.run(["git", "-C", str(repo), "add", "f"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"],
                   check=True)
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    monkeypatch.delenv(COMMIT_ENV, raising=False)
    assert git_info(repo)["commit"] == head
    monkeypatch.setenv(COMMIT_ENV, "abc1234")
    info = git_info(repo)
    assert info["commit"] == "abc1234" and info["checkout_commit"] == head and info["commit_source"] == COMMIT_ENV
