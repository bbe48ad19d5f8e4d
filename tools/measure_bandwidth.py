"""Print the measured device-to-device copy bandwidth of GPU 0 as JSON (the HBM byte roof)."""

import json

from composer.bench.bandwidth import copy_bandwidth
from composer.runtime import Device

if __name__ == "__main__":
    device = Device()
    print(json.dumps({"device": repr(device), **copy_bandwidth(device)}, indent=2))
