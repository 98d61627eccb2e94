#!/bin/bash
# usage: run-sentinel.sh STORE_URL
cd /tmp/prof
export PYTHONPATH=/work/main/src DSX_SENTINEL_TOKENS=bench-scale-token-0123456789abcdef
exec /work/main/.venv/bin/python -m dsx sentinel run --kubeconfig /root/.local/state/dsx/sim/prof/kubeconfig --config /tmp/prof/policy.yaml --store "$1" --port 9555 --state-dir /tmp/prof/state --owner prof --log-level warning --workers 32
