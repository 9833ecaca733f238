#!/usr/bin/env bash
# steer simulate against real resolvers on loopback (issue 27): steer with
# a 95/5 split stable/canary (TTL 10 s, ECS on), a plain Unbound (the big
# site: one cache, no ECS), an Unbound with subnetcache (the ECS site),
# and 50 small resolvers emulated in the generator; 2,000 user q/s for 30
# minutes, the canary drained 2 minutes before the end. Then the same
# population as a simulate scenario, compiled against the same
# configuration and run 200 times, and the comparison: the share of
# 10-second bins whose observed canary share lies inside the predicted
# p5–p95 band (want ≥ 90 %), steer's misses/s against the predicted
# authoritative q/s (want ±10 %), and the drain's last canary query and
# "safe at" against their predicted bands. Three deliberately wrong
# predictions are compared too; each must fail.
#
#   bench/simulate.sh [--duration 30m] [--keep] [simcheck flags: -rate 2000 -ttl 10 -runs 200 -bins ...]
#   bench/simulate.sh --replay DIR     # compare a kept run again (after a change of the simulator)
#
# Needs unbound (apt-get install unbound; the daemon need not run as a
# service). Traffic goes to 127.0.0.1 only; Unbound and steer are
# stopped when it exits. Exits 1 when the honest prediction fails.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
DURATION=30m
KEEP=0
REPLAY=""
ARGS=()
while [ $# -gt 0 ]; do
	case "$1" in
	--duration) DURATION=$2; shift 2 ;;
	--keep) KEEP=1; shift ;;
	--replay) REPLAY=$2; shift 2 ;;
	*) ARGS+=("$1"); shift ;;
	esac
done
command -v unbound >/dev/null || { echo "simulate.sh: unbound not found (apt-get install unbound)" >&2; exit 2; }

WORK=$(mktemp -d)
trap '[ "$KEEP" = 1 ] && echo "== kept $WORK" >&2 || rm -rf "$WORK"' EXIT
echo "== building bench/simcheck" >&2
(cd "$REPO" && go build -o "$WORK/simcheck" ./bench/simcheck)
if [ -n "$REPLAY" ]; then
	"$WORK/simcheck" -replay "$REPLAY" "${ARGS[@]}"
	exit
fi
echo "== running $DURATION (the prediction follows; the run's files are in $WORK/run)" >&2
"$WORK/simcheck" -dir "$WORK/run" -duration "$DURATION" "${ARGS[@]}"
