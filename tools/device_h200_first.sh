# Sourced first by a device call that runs an H200's pending work when the device lends an H200 and its own work
# otherwise (every start of sessions 27-30 asking for an H200 got an H100):
#
#   source tools/device_h200_first.sh docs/data/h200_s28/calls/call6.sh 560
#
# On an H200 this replaces the call by SCRIPT, with CALL_BUDGET_S=BUDGET (default 560) bounding it; on any other GPU
# it returns with $GPU holding the GPU's name, and the call goes on (`source tools/device_prelude.sh` next).
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$GPU" == *H200* && -n "${1:-}" ]]; then
  CALL_BUDGET_S=${2:-560} exec bash "$1"
fi
