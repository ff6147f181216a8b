#!/usr/bin/env bash
# release-check: build every nested module as a user who ran `go get`
# would: no go.work, no replace, the core, pgstore and metrics served at
# the version the nested modules require from a file-based module proxy
# made from this tree (internal/cmd/modproxy), every other module from the
# local module cache. Then a fresh module gets the core, pgstore and
# metrics by version and builds a program using all three. Nothing in the tree is written; the module
# cache used is a temporary one.
set -euo pipefail
GO=${GO:-go}
cd "$(dirname "$0")/.."
root=$PWD

version=$(sed -n 's/^[[:space:]]*github.com\/forage-go\/forage \(v[0-9][0-9.]*\)$/\1/p' pgstore/go.mod)
if [ -z "$version" ]; then
	echo "release-check: pgstore/go.mod requires no version of github.com/forage-go/forage" >&2
	exit 1
fi
for m in pgstore examples/ohlcv bench metrics; do
	if grep -q '^replace\|^[[:space:]]*github.com/forage-go/forage.* => ' "$m/go.mod"; then
		echo "release-check: $m/go.mod has a replace directive: a user's build would not see it" >&2
		exit 1
	fi
	for dep in $(sed -n 's/^[[:space:]]*\(github.com\/forage-go\/forage[a-z/]*\) \(v[0-9.]*\)$/\1@\2/p' "$m/go.mod"); do
		if [ "${dep#*@}" != "$version" ]; then
			echo "release-check: $m requires $dep, not the release $version" >&2
			exit 1
		fi
	done
done

tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
cache=$($GO env GOMODCACHE)
$GO run ./internal/cmd/modproxy -out "$tmp/proxy" -version "$version" . ./pgstore ./metrics

export GOWORK=off GOFLAGS=-mod=mod GOSUMDB=off GONOSUMDB= GOPRIVATE= GOTOOLCHAIN=local
export GOMODCACHE="$tmp/modcache" GOPROXY="file://$tmp/proxy,file://$cache/cache/download"

for m in pgstore examples/ohlcv bench metrics; do
	echo "== release-check $m (GOWORK=off, github.com/forage-go/forage $version from the proxy)"
	mkdir -p "$tmp/src/$m"
	cp -R "$root/$m/." "$tmp/src/$m/"
	(cd "$tmp/src/$m" && $GO build ./... && $GO vet ./...)
done

echo "== release-check: a new module gets github.com/forage-go/forage{,/pgstore,/metrics}@$version"
mkdir -p "$tmp/user"
cd "$tmp/user"
$GO mod init example.com/collector >/dev/null 2>&1
cat > main.go <<'GO'
package main

import (
	"context"
	"fmt"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/metrics/prom"
	"github.com/forage-go/forage/pgstore"
	"github.com/forage-go/forage/schedule"
)

func main() {
	m, _ := prom.New(prom.Config{})
	reg, _ := budget.NewRegistry(budget.RegistryConfig{Metrics: m})
	s, err := schedule.New(schedule.Config{Budget: reg}, schedule.NewMemoryJobStore(), nil)
	fmt.Println(s != nil, err)
	_, err = pgstore.Open(context.Background(), "postgres://localhost:1/none?connect_timeout=1", pgstore.Config{})
	fmt.Println(err != nil)
}
GO
mods="github.com/forage-go/forage@$version github.com/forage-go/forage/pgstore@$version github.com/forage-go/forage/metrics@$version"
$GO get $mods >/dev/null 2>&1 || $GO get $mods
$GO build ./...
echo "release-check: ok ($version)"
