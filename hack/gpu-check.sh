#!/usr/bin/env bash
# The device check: what only a machine with NVIDIA GPUs can tell (never part of `make test`).
#
#   1. NVML: `dsx sentinel monitor nvml --once` reads every GPU through pynvml into a store
#      (the monitor's real code path), and the events are listed.
#   2. Local certification on the nccl backend: `dsx certify run --executor local` with one
#      simulated node per GPU pair (the builtin worker picks NCCL when CUDA is there), loopback
#      and all-reduce, the report's measured bus bandwidth printed.
#   3. nccl-tests, when its binaries are on PATH or in NCCL_TESTS_DIR (NGC images carry
#      *_perf_mpi in /usr/local/bin): all_reduce_perf -g <GPUs> over the machine's GPUs, read by
#      `dsx certify parse nccl` and judged by the loopback category's published figure for the
#      accelerator, printed beside it (and the transports NCCL reported).
#
# Usage: hack/gpu-check.sh [OUT_DIR]   (about 3 minutes on one H100/H200; needs .venv from `make
# install` with the collectives extra, which `make test` installs)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-${OUT:-/tmp/dsx-gpu-check}}"
mkdir -p "$OUT"
DSX="${DSX:-.venv/bin/dsx}"
PY="${PY:-.venv/bin/python}"
export DSX_STATE_DIR="$OUT/state" DSX_CACHE_DIR="${DSX_CACHE_DIR:-$OUT/cache}"
say() { printf '\n== %s\n' "$*"; }
status=0

say "GPUs"
nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpus.csv" \
  || { echo "no nvidia-smi: not a GPU machine"; exit 3; }
gpus=$(wc -l < "$OUT/gpus.csv")
product=$(head -1 "$OUT/gpus.csv" | cut -d, -f2 | sed 's/^ *//')

say "1. NVML monitor read (dsx sentinel monitor nvml --once)"
if timeout 120 "$DSX" sentinel monitor nvml --node "$(hostname)" --store "sqlite:///$OUT/events.db" --once \
  > "$OUT/nvml.log" 2>&1; then
  "$PY" - "$OUT/events.db" <<'EOF'
import sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute("select count(*) from events").fetchone()
print(f"events stored: {rows[0]}")
EOF
else
  status=1; echo "nvml monitor failed:"; tail -5 "$OUT/nvml.log"
fi

say "2. local certification on the nccl backend ($gpus GPU(s))"
# two ranks (GPUs) per simulated node, every rank its own GPU; one GPU: loopback alone
if [ "$gpus" -ge 2 ]; then nodes=$(( gpus / 2 )); ranks=2; categories=nccl-loopback,nccl-all-reduce
else nodes=1; ranks=1; categories=nccl-loopback; fi
DSX_CERTIFY_BACKEND=nccl timeout 600 "$DSX" certify run --executor local --nodes "$nodes" --ranks-per-node "$ranks" \
  --categories "$categories" --output "$OUT/local-report.json" --quiet > "$OUT/local.txt" 2>&1 \
  || status=1
cat "$OUT/local.txt"
"$PY" - "$OUT/local-report.json" <<'EOF' || status=1
import json, sys
doc = json.load(open(sys.argv[1]))
for category in doc["categories"]:
    for group in category["groups"]:
        metrics = group.get("metrics", {})
        print(f"{category['name']:16} {group['name']:12} busbw {metrics.get('busBandwidthGBps', 0):8.2f} GB/s"
              f"  algbw {metrics.get('algBandwidthGBps', 0):8.2f} GB/s  transports {group.get('transports', [])}")
EOF

say "3. nccl-tests all_reduce_perf -g $gpus"
binary=""
for candidate in "${NCCL_TESTS_DIR:-}/all_reduce_perf" /usr/local/bin/all_reduce_perf_mpi /opt/nccl-tests/build/all_reduce_perf \
  "$(command -v all_reduce_perf 2>/dev/null)"; do
  [ -n "$candidate" ] && [ -x "$candidate" ] && { binary="$candidate"; break; }
done
if [ -z "$binary" ]; then
  echo "nccl-tests not found (set NCCL_TESTS_DIR): skipped"
else
  NCCL_DEBUG=INFO timeout 300 "$binary" -b 8 -e 16G -f 2 -n 20 -w 5 -g "$gpus" > "$OUT/nccl-tests.log" 2>&1 || status=1
  grep -E '^#|^ +[0-9]' "$OUT/nccl-tests.log" | tail -8
  "$DSX" certify parse nccl "$OUT/nccl-tests.log" --format json > "$OUT/nccl-tests.json" 2>/dev/null || status=1
  "$PY" - "$OUT/nccl-tests.log" "$product" <<'EOF' || status=1
import sys
from dsx.certify import grouping, thresholds
from dsx.certify.parsing import nccl, transport
from dsx.model import certify_catalog as catalog

text = open(sys.argv[1]).read()
table = nccl.parse(text).tables[-1]
busbw = max(r.out_of_place.busbw_gbps or 0 for r in table.rows)
accelerator = grouping.architecture(sys.argv[2].replace(" ", "-"))
category = catalog.get("nccl-loopback")
context = thresholds.Context(category.workload_id(category.program), accelerator, "nvlink", category.scale)
rule = thresholds.select(category, context, {}).get(catalog.model.Metric.BUS_BANDWIDTH_GBPS)
published = f"{rule.expression} ({rule.measured_on}; {rule.source})" if rule else f"no published figure for {accelerator}"
print(f"measured busbw {busbw:.2f} GB/s; threshold {published}")
print(f"transports: {transport.read(text).describe()}")
if rule and thresholds.judge(rule, busbw, None) is not None:
    sys.exit(1)
EOF
fi
say "result: $([ $status -eq 0 ] && echo PASS || echo FAIL) (files in $OUT)"
exit $status
