"""Print the measured HBM bandwidth of GPU 0 as JSON: the byte roof of the roofline fractions
(device-to-device copy), and with ``--sms N[,N...]`` the bandwidth a copy kernel draws from inside
green contexts of N SMs (the per-SM ceiling of the model's balance axis: composer/model/capacity.py).

    python3 tools/measure_bandwidth.py [--sms 132,98,66,34,16,8] [--bytes N] [--out FILE]

``--bytes`` sizes each of the copy kernel's two buffers (default 2 GiB: HBM; 8 MiB stays in the
60 MB L2, which measures the L2 bandwidth a partition can draw: the model's l2_bytes capacity; such
buffers are copied back and forth many times per launch, ``composer.bench.bandwidth.copy_passes``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from composer.bench.bandwidth import copy_bandwidth, kernel_copy_bandwidth  # noqa: E402
from composer.cli.arguments import csv_list, positive_int  # noqa: E402
from composer.errors import ComposerError  # noqa: E402
from composer.fileio import emit_json  # noqa: E402
from composer.runtime import Device  # noqa: E402
from composer.runtime.green import open_device  # noqa: E402


def main() -> int:
    try:
        return _measure()
    except ComposerError as exc:  # no GPU, an SM count the split cannot give: one line
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _measure() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sms", type=csv_list(positive_int), default=[],
                        help="comma-separated SM counts for the copy kernel (even, >= 2, <= the device's)")
    parser.add_argument("--bytes", type=positive_int, default=2 * 2**30,
                        help="bytes per buffer of the copy kernel (default 2 GiB)")
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args()
    device = Device()
    report: dict = {"device": repr(device), **copy_bandwidth(device)}
    sms_full = device.sm_count
    device.close()
    by_sms = {}
    for sms in args.sms:
        dev = open_device(None if sms == sms_full else sms)
        try:
            by_sms[str(sms)] = kernel_copy_bandwidth(dev, nbytes=args.bytes)
        finally:
            dev.close()
        print(f"{sms} SMs: {by_sms[str(sms)]['median_Bps'] / 1e12:.3f} TB/s", file=sys.stderr)
    if by_sms:
        report["kernel_copy_by_sms"] = by_sms
    emit_json(report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
