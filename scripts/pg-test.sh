#!/usr/bin/env bash
# pg-test.sh CMD [ARGS...]: run CMD against a throwaway PostgreSQL server.
#
#   cd pgstore && bash ../scripts/pg-test.sh go test -race ./...
#
# It creates a cluster in a temporary directory (initdb), starts it on a
# free loopback TCP port (pg_ctl), exports FORAGE_PG_DSN for CMD, and stops
# and deletes the cluster when CMD ends, whatever happens. CMD's exit status
# is the script's.
#
# - If FORAGE_PG_DSN is already set, no server is started: CMD runs against
#   that server.
# - The server binaries are looked up in /usr/lib/postgresql/<version>/bin
#   (the newest version first), then on PATH. If there are none and the
#   script runs as root, it installs them with apt-get (Debian/Ubuntu).
# - PostgreSQL refuses to run as root: as root the server runs as the
#   'postgres' system user (which the package creates), in a directory it
#   owns. Authentication is 'trust', for 127.0.0.1 only: the cluster is
#   throwaway and listens on loopback alone.
# - FORAGE_PG_OPTS adds server settings to the command line, e.g.
#   "-c shared_preload_libraries=pg_stat_statements" (make goodput-pg
#   counts the statements each process sends).
set -euo pipefail

if [ "$#" -eq 0 ]; then
	echo "usage: $0 CMD [ARGS...]" >&2
	exit 2
fi

if [ -n "${FORAGE_PG_DSN:-}" ]; then
	echo "pg-test: using the server in FORAGE_PG_DSN" >&2
	exec "$@"
fi

log() { echo "pg-test: $*" >&2; }

# find_bindir prints the directory holding initdb, pg_ctl and postgres.
find_bindir() {
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -V -r); do
		if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ]; then
			echo "$d"
			return 0
		fi
	done
	if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
		dirname "$(readlink -f "$(command -v initdb)")"
		return 0
	fi
	return 1
}

bindir=$(find_bindir || true)
if [ -z "$bindir" ]; then
	if [ "$(id -u)" -ne 0 ]; then
		log "no PostgreSQL server binaries found and not root: install the 'postgresql' package"
		exit 1
	fi
	log "installing PostgreSQL (apt-get install postgresql)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq postgresql >&2
	bindir=$(find_bindir || true)
	if [ -z "$bindir" ]; then
		log "apt-get installed postgresql but no initdb/pg_ctl was found"
		exit 1
	fi
fi

# as_pg runs a command as the user that owns the cluster.
if [ "$(id -u)" -eq 0 ]; then
	if ! id postgres >/dev/null 2>&1; then
		log "running as root, but there is no 'postgres' user to run the server as"
		exit 1
	fi
	as_pg() { (cd "$tmp" && runuser -u postgres -- "$@"); }
else
	as_pg() { (cd "$tmp" && "$@"); }
fi

# In /tmp, not $TMPDIR: the postgres user must be able to reach it.
tmp=$(mktemp -d /tmp/forage-pg.XXXXXX)
data="$tmp/data"
started=
cleanup() {
	if [ -n "$started" ]; then
		as_pg "$bindir/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "$(id -u)" -eq 0 ]; then
	chown postgres: "$tmp"
fi
chmod 700 "$tmp"

as_pg "$bindir/initdb" -D "$data" -U postgres -A trust -E UTF8 --locale=C --no-sync >"$tmp/initdb.log" 2>&1 || {
	cat "$tmp/initdb.log" >&2
	log "initdb failed"
	exit 1
}

# port_free reports whether nothing listens on 127.0.0.1:$1.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Durability is off (fsync, synchronous commit): the data dies with the run.
for attempt in 1 2 3 4 5; do
	port=$((20000 + RANDOM % 40000))
	port_free "$port" || continue
	if as_pg "$bindir/pg_ctl" -D "$data" -l "$tmp/server.log" -w -t 60 -o \
		"-h 127.0.0.1 -p $port -k $tmp -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 ${FORAGE_PG_OPTS:-}" \
		start >/dev/null; then
		started=1
		break
	fi
	log "could not start on port $port (attempt $attempt):"
	tail -n 5 "$tmp/server.log" >&2 || true
done
if [ -z "$started" ]; then
	log "PostgreSQL did not start"
	exit 1
fi

export FORAGE_PG_DSN="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
log "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') ($bindir) on 127.0.0.1:$port"
set +e
"$@"
status=$?
set -e
exit "$status"
