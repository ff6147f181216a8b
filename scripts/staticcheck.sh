#!/usr/bin/env bash
# staticcheck.sh [ARGS...]: runs staticcheck, pinned, in the current module.
#
# The pinned version is installed on first use into a directory of the
# project's own ($STATICCHECK_BIN, default ~/.cache/forage/bin), from the Go
# module proxy, so a fresh machine needs nothing but Go. A staticcheck
# already on the PATH is used only if it is the pinned version.
set -euo pipefail

version=2026.2.2 # the release; its module version is below
modversion=v0.8.2
bin_dir=${STATICCHECK_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/forage/bin}
tool=$bin_dir/staticcheck-$version

if command -v staticcheck >/dev/null 2>&1 && staticcheck -version 2>/dev/null | grep -q "^staticcheck $version "; then
	tool=$(command -v staticcheck)
elif [ ! -x "$tool" ]; then
	mkdir -p "$bin_dir"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	echo "staticcheck.sh: installing staticcheck $version into $bin_dir" >&2
	GOBIN=$tmp GOFLAGS=-mod=mod go install "honnef.co/go/tools/cmd/staticcheck@$modversion"
	mv "$tmp/staticcheck" "$tool"
fi
exec "$tool" "${@:-./...}"
