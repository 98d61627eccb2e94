#!/usr/bin/env bash
# The kernel-log monitor inside the image `make image` built, as the chart runs it: not root (uid
# 65532), reading the host journal as a member of adm (gid 4), through the image's journalctl.
# A real journal file (systemd-journal-remote writes it from journald's export format) holds an
# Xid 79 from this boot among other kernel lines; the monitor (`--journal --once`) must store
# exactly that Xid. Needs buildah and systemd-journal-remote on the host (Debian packages).
#
#   hack/image-monitor-check.sh [IMAGE]     # default ghcr.io/dsx-run/dsx:<version>
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$repo/src/dsx/__init__.py")
image=${1:-ghcr.io/dsx-run/dsx:$version}
work=$(mktemp -d)
container=""
cleanup() {
  if [ -n "$container" ]; then buildah rm "$container" >/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT

machine_id=0123456789abcdef0123456789abcdef
boot_id=$(tr -d - </proc/sys/kernel/random/boot_id)
now_us=$(($(date +%s) * 1000000))
mkdir -p "$work/journal/$machine_id" "$work/out"
echo "$machine_id" >"$work/machine-id"
entry() {  # cursor-less export entry: index, message
  printf '__REALTIME_TIMESTAMP=%s\n__MONOTONIC_TIMESTAMP=%s\n_BOOT_ID=%s\n_MACHINE_ID=%s\n_TRANSPORT=kernel\nPRIORITY=3\nSYSLOG_IDENTIFIER=kernel\n_HOSTNAME=gpu-node\nMESSAGE=%s\n\n' \
    "$((now_us + $1))" "$((1000 + $1))" "$boot_id" "$machine_id" "$2"
}
{
  entry 1 "eth0: Link is Up - 100Gbps/Full - flow control off"
  entry 2 "NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
  entry 3 "EXT4-fs (nvme0n1p1): mounted filesystem with ordered data mode"
} >"$work/in.export"
/lib/systemd/systemd-journal-remote -o "$work/journal/$machine_id/system.journal" "$work/in.export"
# as systemd leaves it: root-owned, readable by a group the monitor is in, by nobody else
chgrp -R 4 "$work/journal"
chmod 0750 "$work/journal" "$work/journal/$machine_id"
chmod 0640 "$work/journal/$machine_id/system.journal"
chmod 0777 "$work/out"

container=$(buildah from "$image")
echo "image user: $(buildah inspect --format '{{.OCIv1.Config.User}}' "$container")"
buildah run --user 65532:4 \
  -v "$work/journal:/var/log/journal:ro" -v "$work/machine-id:/etc/machine-id:ro" -v "$work/out:/out" \
  "$container" -- dsx sentinel monitor kernel-log --node gpu-node --journal --once \
  --state /out/kernel-log.json --store sqlite:////out/events.db --init --log-format text
buildah run --user 65532:65532 -v "$work/journal:/var/log/journal:ro" "$container" -- \
  sh -c 'journalctl -k -q >/dev/null 2>&1 && echo "outside adm: the journal was readable" && exit 1 || echo "outside adm: no journal (as it should be)"'
"$repo/.venv/bin/python" - "$work/out/events.db" <<'EOF'
import sys
from dsx.store import open_store
store = open_store(f"sqlite:///{sys.argv[1]}")
found = [(s.event.node_name, s.event.check_name, s.event.error_codes) for s in store.events(node_name="gpu-node")]
print("stored:", found)
assert found == [("gpu-node", "KernelLogXid", ("79",))], found
EOF
echo "ok: the monitor in $image read the journal as uid 65532 (group adm) and stored the Xid 79"
