#!/usr/bin/env bash
# Builds the steer Debian package with nfpm (packaging/nfpm.yaml):
#   scripts/package.sh            -> dist/steer_VERSION_ARCH.deb
#   VERSION=0.1.0 OUT=/tmp scripts/package.sh
# The version is VERSION, else the exact tag vX.Y.Z of HEAD, else the last
# tag with the commits since (0.1.0+git3.gabcdef0), else 0.0.0~gitDATE.SHA
# (before the first tag). The binary is built with -trimpath and the
# version, commit and commit date set with -ldflags (internal/version).
# nfpm runs with "go run ...@$NFPM_VERSION": no change to go.mod.
# Prints the path of the package as its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
NFPM_VERSION=${NFPM_VERSION:-v2.45.2}
OUT=${OUT:-dist}
ARCH=${ARCH:-$(go env GOARCH)}

commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
epoch=$(git show -s --format=%ct HEAD 2>/dev/null || date +%s)
date=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
if [ -z "${VERSION:-}" ]; then
	if tag=$(git describe --tags --exact-match --match 'v[0-9]*' HEAD 2>/dev/null); then
		VERSION=${tag#v}
	elif desc=$(git describe --tags --long --match 'v[0-9]*' HEAD 2>/dev/null); then
		# v0.1.0-3-gabcdef0 -> 0.1.0+git3.gabcdef0
		base=${desc%-*-g*}; rest=${desc#"$base"-}
		VERSION="${base#v}+git${rest%%-*}.${rest#*-}"
	else
		VERSION="0.0.0~git$(date -u -d "@$epoch" +%Y%m%d%H%M%S).$(git rev-parse --short=7 HEAD 2>/dev/null || echo unknown)"
	fi
fi
export VERSION ARCH SOURCE_DATE_EPOCH=$epoch

STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
export STAGE

pkg=github.com/steer-dns/steer/internal/version
CGO_ENABLED=0 GOARCH=$ARCH go build -trimpath -buildvcs=false \
	-ldflags "-s -w -X $pkg.Version=v$VERSION -X $pkg.Commit=$commit -X $pkg.Date=$date" \
	-o "$STAGE/steer" ./cmd/steer

# Man pages and completions come from the binary's own definitions; run
# a host build of it when cross-compiling.
gen=$STAGE/steer
if [ "$ARCH" != "$(go env GOHOSTARCH)" ]; then
	gen=$STAGE/steer-host
	go build -o "$gen" ./cmd/steer
fi
"$gen" manpage 1 | gzip -9n >"$STAGE/steer.1.gz"
"$gen" manpage 5 | gzip -9n >"$STAGE/steer.yaml.5.gz"
"$gen" completion bash >"$STAGE/steer.bash"
"$gen" completion zsh >"$STAGE/_steer"
"$gen" completion fish >"$STAGE/steer.fish"
rm -f "$STAGE/steer-host"

gzip -9n <THIRD_PARTY_NOTICES >"$STAGE/THIRD_PARTY_NOTICES.gz"
mkdir -p "$STAGE/examples"
if [ -d examples ]; then
	cp -r examples/. "$STAGE/examples/"
	find "$STAGE/examples" -name '*_test.go' -delete
	find "$STAGE/examples" -type d -exec chmod 755 {} + ; find "$STAGE/examples" -type f -exec chmod 644 {} +
fi

# /usr/share/doc/steer/copyright in the machine-readable format, with the
# embedded database's licence.
{
	cat <<-'HEAD'
	Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
	Upstream-Name: steer
	Source: https://github.com/steer-dns/steer
	Comment: The Go modules linked into /usr/bin/steer are listed with their
	 versions, licences and licence texts in
	 /usr/share/doc/steer/THIRD_PARTY_NOTICES.gz.

	Files: *
	Copyright: 2026 steer developers
	License: Apache-2.0
	 Licensed under the Apache License, Version 2.0 (the "License"); you may
	 not use this file except in compliance with the License.
	 .
	 On Debian systems, the full text of the Apache License, Version 2.0 can be
	 found in the file /usr/share/common-licenses/Apache-2.0.

	Files: internal/geo/embedded/*
	Copyright: the ip-location-db project (https://github.com/sapics/ip-location-db), from iptoasn.com data
	License: PDDL-1.0
	HEAD
	sed -e 's/^$/./' -e 's/^/ /' internal/geo/embedded/LICENSE-PDDL.txt
} >"$STAGE/copyright"

# changelog.gz: a native package's Debian changelog, pointing at the
# project's own.
{
	echo "steer ($VERSION) unstable; urgency=medium"
	echo
	echo "  * Built from commit ${commit:0:12}. The changes are listed in"
	echo "    CHANGELOG.md of the source (https://github.com/steer-dns/steer)."
	echo
	echo " -- steer developers <steer@steer-dns.org>  $(date -u -R -d "@$epoch")"
} | gzip -9n >"$STAGE/changelog.gz"

mkdir -p "$OUT"
deb="$OUT/steer_${VERSION}_${ARCH}.deb"
rm -f "$deb"
# nfpm expands ${VERSION} and ${ARCH} itself but not paths in contents.
sed "s|\${STAGE}|$STAGE|g" packaging/nfpm.yaml >"$STAGE/nfpm.yaml"
go run "github.com/goreleaser/nfpm/v2/cmd/nfpm@$NFPM_VERSION" package \
	--config "$STAGE/nfpm.yaml" --packager deb --target "$deb" >&2
echo "$deb"
