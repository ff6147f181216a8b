package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/klines"
	"github.com/forage-go/forage/pgstore"
	"github.com/forage-go/forage/schedule"
	"github.com/forage-go/forage/slice"
	"github.com/jackc/pgx/v5"
)

// connectTimeout bounds connecting to PostgreSQL and migrating, so an
// unreachable store fails fast instead of hanging.
const connectTimeout = 15 * time.Second

// candlesTable is created next to pgstore's tables, in the same schema.
// The primary key is the natural key: a candle is stored once, and a
// replay does nothing (closed candles never change, so the first write
// stands, as in the file store). Prices stay exact as numeric.
const candlesTable = `CREATE TABLE IF NOT EXISTS {{schema}}.candles (
	symbol     text        NOT NULL,
	"interval" text        NOT NULL,
	open_time  timestamptz NOT NULL,
	open       numeric     NOT NULL,
	high       numeric     NOT NULL,
	low        numeric     NOT NULL,
	close      numeric     NOT NULL,
	volume     numeric     NOT NULL,
	PRIMARY KEY (symbol, "interval", open_time)
)`

// insertCandles upserts one page in one statement.
const insertCandles = `INSERT INTO {{schema}}.candles (symbol, "interval", open_time, open, high, low, close, volume)
SELECT $1, $2, t.open_time, t.open::numeric, t.high::numeric, t.low::numeric, t.close::numeric, t.volume::numeric
FROM unnest($3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])
	AS t(open_time, open, high, low, close, volume)
ON CONFLICT (symbol, "interval", open_time) DO NOTHING`

const selectCandles = `SELECT (extract(epoch FROM open_time) * 1000)::bigint, open::text, high::text, low::text, close::text, volume::text
FROM {{schema}}.candles WHERE symbol = $1 AND "interval" = $2 ORDER BY open_time`

// pgBackend keeps checkpoints, leases, gaps, the providers' records and
// shares, and the candles in one PostgreSQL schema.
type pgBackend struct {
	store *pgstore.Store
	sql   func(string) string // fills the quoted schema into a statement
}

// openPG connects, migrates pgstore's schema, and creates the candles
// table. Every process may do this at start-up: Migrate is idempotent and
// locked, and the table is created under an advisory lock.
func openPG(ctx context.Context, dsn, schema string) (*pgBackend, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	st, err := pgstore.Open(ctx, dsn, pgstore.Config{Schema: schema})
	if errors.Is(err, pgstore.ErrInvalidConfig) {
		return nil, badFlag("pg-schema", "must be 1 to 63 ASCII letters, digits or underscores, not starting with a digit", schema)
	}
	if err != nil {
		return nil, err
	}
	b := &pgBackend{store: st, sql: strings.NewReplacer("{{schema}}", pgx.Identifier{st.Schema()}.Sanitize()).Replace}
	if err := st.Migrate(ctx); err != nil {
		st.Close()
		return nil, err
	}
	err = pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('forage/examples/ohlcv'))`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, b.sql(candlesTable))
		return err
	})
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("create the candles table in schema %q: %w", st.Schema(), err)
	}
	return b, nil
}

// sink is pgstore's TxSink with the candle upsert: each page's candles
// and the checkpoint after them commit in one transaction, so a crash or a
// lost lease replays nothing and leaves nothing behind.
func (b *pgBackend) sink(st *schedule.Stream[klines.Candle], symbol, interval string) error {
	sink, err := pgstore.NewTxSink(b.store, b.upsert(symbol, interval))
	if err != nil {
		return err
	}
	st.TxSink = sink
	return nil
}

func (b *pgBackend) checkpoints() checkpoint.Store { return b.store }

func (b *pgBackend) first(ctx context.Context, symbol, interval string) (time.Time, bool, error) {
	var t *time.Time
	err := b.store.Pool().QueryRow(ctx, b.sql(`SELECT min(open_time) FROM {{schema}}.candles WHERE symbol = $1 AND "interval" = $2`), symbol, interval).Scan(&t)
	if err != nil || t == nil {
		return time.Time{}, false, err
	}
	return t.UTC(), true, nil
}

// upsert returns the write of a page of symbol's candles at interval in
// tx: the candles not stored yet, in one statement.
func (b *pgBackend) upsert(symbol, interval string) func(context.Context, pgx.Tx, slice.Page[klines.Candle]) error {
	insert := b.sql(insertCandles)
	return func(ctx context.Context, tx pgx.Tx, p slice.Page[klines.Candle]) error {
		if len(p.Records) == 0 {
			return nil
		}
		times := make([]time.Time, len(p.Records))
		cols := [5][]string{}
		for i, c := range p.Records {
			times[i] = c.OpenTime
			for j, v := range []string{c.Open, c.High, c.Low, c.Close, c.Volume} {
				cols[j] = append(cols[j], v)
			}
		}
		_, err := tx.Exec(ctx, insert, symbol, interval, times, cols[0], cols[1], cols[2], cols[3], cols[4])
		return err
	}
}

func (b *pgBackend) shares() budget.ShareStore { return b.store }

// transient reports whether err is PostgreSQL unreachable for a moment
// (see [pgstore.Transient]): running again is safe whatever happened to the
// transaction in flight.
func (b *pgBackend) transient(err error) bool { return pgstore.Transient(err) }

// records is the store's provider_records table: every process, and every
// restart, starts at the rate the collectors learned and honours a pause
// any of them was given, ending a stream's run with the time to resume
// instead of waiting for it.
func (b *pgBackend) records() budget.RecordStore { return b.store }

func (b *pgBackend) Close() error {
	b.store.Close()
	return nil
}

func (b *pgBackend) export(ctx context.Context, symbol, interval string, w io.Writer) (int, error) {
	rows, err := b.store.Pool().Query(ctx, b.sql(selectCandles), symbol, interval)
	if err != nil {
		return 0, fmt.Errorf("export %s %s: %w", symbol, interval, err)
	}
	defer rows.Close()
	bw := bufio.NewWriter(w)
	n := 0
	for rows.Next() {
		var ms int64
		var o, h, l, c, v string
		if err := rows.Scan(&ms, &o, &h, &l, &c, &v); err != nil {
			return n, fmt.Errorf("export %s %s: %w", symbol, interval, err)
		}
		fmt.Fprintf(bw, "%d,%s,%s,%s,%s,%s\n", ms, o, h, l, c, v)
		n++
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("export %s %s: %w", symbol, interval, err)
	}
	return n, bw.Flush()
}
