#!/usr/bin/env bash
# Fleet revision soak (issue 25): 6 fleet members on an embedded etcd, 20
# targets × 5 observers checked every 100 ms, lease_ttl 3 s, stable health,
# for a window (default 10 minutes). Prints how much etcd's revision grew
# against the bound (the observers' status changes + one refresh per
# lease_ttl/3 per node) and what the revisions were spent on. It is the
# suite's TestFleetRevisionGrowth (20 s there) run for longer.
#
#   bench/fleet-soak.sh [DURATION]      # e.g. 10m (default), 30m, 90s
#
# Everything listens on 127.0.0.1 and stops when the test ends.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
WINDOW=${1:-10m}
command -v go >/dev/null || { echo "fleet-soak.sh: go not found" >&2; exit 1; }
cd "$REPO"
# The window plus start-up and the drain: a generous timeout.
STEER_FLEET_SOAK=$WINDOW go test -count=1 -run '^TestFleetRevisionGrowth$' -timeout 3h -v ./internal/fleetnode/ |
	grep -E '^(fleet revision growth|keys written|--- |ok|FAIL)|quorum_soak_test'
