#!/usr/bin/env bash
# The README's picture of the dashboard (docs/ui-overview.png): builds
# steer, serves Larkbook's demo configuration (examples/larkbook) with the
# admin API on free loopback ports, sends queries from clients around the
# world, logs in with headless Chromium (apt: chromium) and writes a PNG of
# the overview, refusing a blank page or one over 300 KB.
#
#   bench/ui-screenshot.sh                 # -> docs/ui-overview.png
#   OUT=/tmp/ui.png bench/ui-screenshot.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
OUT=${OUT:-docs/ui-overview.png}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/steer" ./cmd/steer
go run ./bench/uiscreenshot -steer "$tmp/steer" -out "$OUT" "$@"
