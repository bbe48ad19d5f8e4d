"""Session 33: a schedules directory (for $COMPOSER_SCHEDULES) whose p = 7 FUSED table is the H100's linked one
(session 32's ``links_schedules.py h100_sxm`` output) at a preferred carveout of 71 % (164 KB of shared memory, nine
of its blocks, 92 KB of L1): the split the driver chose for FUSED with vmapP, where the linked form got 196 KB
(ten blocks, 60 KB of L1) and lost 3 % with an L1 hit rate of 23.2 against 26.6 % (session 33 call 4). If the
L1 is the cause, this table takes back the loss and keeps the links' 31 MB.

    python3 docs/data/h200_s32/calls/links_schedules.py h100_sxm .cache/s32_links_h100
    python3 docs/data/h200_s33/calls/fused_cv71_schedules.py .cache/s32_links_h100 .cache/s33_fused_cv71"""

import re
import sys
from pathlib import Path

source, out = Path(sys.argv[1]), Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
text = (source / "p0007.toml").read_text()
pattern = r"(?ms)^\[paths\.FUSED\]\n(.*?)(?=^\[|\Z)"
body = re.search(pattern, text).group(1)
if "exterior_maps = false\n" not in body:
    sys.exit("the FUSED table reads vmapP: run links_schedules.py first")
body = body.replace("exterior_maps = false\n", "exterior_maps = false\ncarveout = 71\n")
(out / "p0007.toml").write_text(re.sub(pattern, lambda m: f"[paths.FUSED]\n{body}", text))
print(out / "p0007.toml")
