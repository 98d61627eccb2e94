#!/usr/bin/env bash
# `make screenshots`: run the README's certify step (8 local nodes, node-5 slow) and render its HTML
# report in headless Chromium into docs/images/certification-report.png, to look at and commit.
# The charts' content is checked on every `make test` by tests/unit/certify/test_report_charts.py;
# this is the picture of it. Needs torch (dsx[collectives]) and Chromium (Debian: apt-get install chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
DSX="${DSX:-.venv/bin/dsx}"
BROWSER="$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)"
if [ -z "$BROWSER" ]; then
  echo "screenshots: no Chromium on PATH; install it (Debian/Ubuntu: apt-get install -y chromium)" >&2
  exit 3
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# exit 1 is the expected verdict: the injected slow node fails
"$DSX" certify run --executor local --nodes 8 --categories nccl-all-reduce,nccl-loopback,training \
  --inject node-5:slow --output "$work/report.json" --html "$work/report.html" --quiet || [ $? -eq 1 ]
mkdir -p docs/images
"$BROWSER" --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
  --window-size=1150,"${HEIGHT:-3950}" --screenshot="$PWD/docs/images/certification-report.png" \
  "file://$work/report.html" 2>/dev/null
echo "wrote docs/images/certification-report.png"
