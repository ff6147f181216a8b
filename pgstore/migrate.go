package pgstore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// The schema's migrations, applied in order of the number their file name
// starts with. A migration is never edited once released: a change is a new
// file. Each is idempotent on its own (IF NOT EXISTS, OR REPLACE), so a
// schema created by hand or half-migrated by an older tool converges too.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one numbered schema change.
type migration struct {
	version int
	name    string
	sql     string // with {{schema}} still in it
}

// migrations returns the embedded migrations, sorted by version. The file
// names are fixed at build time, so a malformed one is a programming error.
func migrations() []migration {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		panic(err)
	}
	out := make([]migration, 0, len(names))
	for _, path := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(path, "migrations/"), ".sql")
		num, name, _ := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			panic(fmt.Sprintf("pgstore: migration file %s must start with its number", path))
		}
		body, err := migrationFiles.ReadFile(path)
		if err != nil {
			panic(err)
		}
		out = append(out, migration{version: v, name: name, sql: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out
}

const (
	migrationsTableSQL = `
CREATE SCHEMA IF NOT EXISTS {{schema}};
CREATE TABLE IF NOT EXISTS {{schema}}.migrations (
	version    integer     PRIMARY KEY,
	name       text        NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`
	migrationsAppliedSQL = `SELECT coalesce(max(version), 0) FROM {{schema}}.migrations`
	recordMigrationSQL   = `INSERT INTO {{schema}}.migrations (version, name) VALUES ($1, $2)`
	// migrateLockSQL serializes migrators of one schema across processes;
	// the lock ends with the transaction.
	migrateLockSQL = `SELECT pg_advisory_xact_lock(hashtext('forage.pgstore.migrate'), hashtext($1::text))`

	// minServerVersion is PostgreSQL 14 (server_version_num): the first
	// with multiranges, and whose extract(epoch ...) is exact numeric.
	minServerVersion = 140000
)

// Migrate creates the store's schema if needed and applies every migration
// it lacks, in one transaction: afterwards the schema is complete, or, on
// error, unchanged. It is idempotent and safe to run from many processes at
// once (they take turns on an advisory lock), so a host may simply call it
// at start-up. It fails if the schema was migrated by a newer pgstore, or
// if the server is older than PostgreSQL 14.
//
// The migrations create the tables of the checkpoint store (streams,
// checkpoints, gaps, gap_ids, coverage), the job store's tables (jobs,
// job_providers) and claim function, the provider records
// (provider_records) and the providers' shares (provider_shares); a
// migrations table records what was applied. (The shared pacer of
// earlier versions, a pacers table with SQL functions restating the gcra
// arithmetic, is dropped by migration 010.)
func (s *Store) Migrate(ctx context.Context) error {
	if err := enter(ctx, nil); err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: Migrate: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	var version int
	if err := tx.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		return fmt.Errorf("pgstore: Migrate: read the server version: %w", err)
	}
	if version < minServerVersion {
		return fmt.Errorf("pgstore: Migrate: PostgreSQL 14 or later is required (multiranges, exact clock reads); the server is version %d.%d",
			version/10000, version%10000)
	}
	if _, err := tx.Exec(ctx, migrateLockSQL, s.schema); err != nil {
		return fmt.Errorf("pgstore: Migrate: lock: %w", err)
	}
	if _, err := tx.Exec(ctx, s.sql.migrationsTable); err != nil {
		return fmt.Errorf("pgstore: Migrate: create schema %q: %w", s.schema, err)
	}
	var applied int
	if err := tx.QueryRow(ctx, s.sql.migrationsApplied).Scan(&applied); err != nil {
		return fmt.Errorf("pgstore: Migrate: read applied migrations: %w", err)
	}
	all := migrations()
	if latest := all[len(all)-1].version; applied > latest {
		return fmt.Errorf("pgstore: Migrate: schema %q is at version %d, newer than this pgstore knows (%d): upgrade pgstore",
			s.schema, applied, latest)
	}
	quoted := strings.NewReplacer("{{schema}}", quoteIdent(s.schema))
	for _, m := range all {
		if m.version <= applied {
			continue
		}
		if _, err := tx.Exec(ctx, quoted.Replace(m.sql)); err != nil {
			return fmt.Errorf("pgstore: Migrate: schema %q: migration %03d_%s: %w", s.schema, m.version, m.name, err)
		}
		if _, err := tx.Exec(ctx, s.sql.recordMig, m.version, m.name); err != nil {
			return fmt.Errorf("pgstore: Migrate: record migration %d: %w", m.version, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: Migrate: commit: %w", err)
	}
	return nil
}
