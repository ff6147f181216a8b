package klines_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/checkpoint"
	"github.com/forage-go/forage/klines"
	"github.com/forage-go/forage/providertest"
	"github.com/forage-go/forage/slice"
)

// direct is a budget.Provider that makes exactly one attempt per call, with
// no pacing: the fetches cost only what the simulated exchange takes.
type direct struct{}

func (direct) Do(ctx context.Context, _ *budget.Run, attempt func(context.Context) forage.Outcome, _ ...budget.CallOption) error {
	if out := attempt(ctx); out.Err != nil || out.Status != http.StatusOK {
		return &budget.Error{Reason: forage.ReasonPermanent, Status: out.Status, Err: out.Err}
	}
	return nil
}

func (direct) Snapshot() budget.Snapshot { return budget.Snapshot{Key: "direct"} }

// BenchmarkDurablePath measures one stream's catch-up into the FileSink
// and a checkpoint file store on this machine's disk (the benchmark's temp
// dir): pages of 100 candles from the in-process simulated exchange,
// fetched ahead as fast as it answers (the default Prefetch), made durable
// with one fsync of the candles and two of the checkpoint (temp file, then
// directory) per write and commit: per page with MaxBatch 1, per batch of
// the pages that landed meanwhile with the default. What it reports,
// pages/s, is the most one stream can collect on this disk.
func BenchmarkDurablePath(b *testing.B) {
	const pages, page = 200, 100
	listed := time.Now().Add(-20 * 24 * time.Hour).Truncate(time.Hour) // 28800 candles
	srv, err := providertest.New(providertest.Config{Symbols: []providertest.Symbol{{Name: "BTCUSDT", Listed: listed}}})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name     string
		maxBatch int
	}{{"batch=off", 1}, {"batch=default", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			slices, commits := 0, 0
			for b.Loop() {
				rep := durableRun(b, srv, listed, pages*page, bc.maxBatch)
				if rep.Slices != pages {
					b.Fatalf("report %+v, want %d slices", rep, pages)
				}
				slices, commits = slices+rep.Slices, commits+rep.Commits
			}
			b.ReportMetric(float64(slices)/b.Elapsed().Seconds(), "pages/s")
			b.ReportMetric(float64(slices)/float64(commits), "pages/commit")
		})
	}
}

// durableRun collects n 1m candles of BTCUSDT from listed on into a fresh
// directory, with MaxBatch maxBatch.
func durableRun(b *testing.B, srv *providertest.Server, listed time.Time, n, maxBatch int) slice.Report {
	b.Helper()
	dir := b.TempDir()
	sink, err := klines.OpenFileSink(dir, "BTCUSDT", "1m")
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	store, err := checkpoint.OpenFileStore(dir+"/checkpoints", checkpoint.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	until := listed.Add(time.Duration(n) * time.Minute)
	src := &klines.Source{Client: srv.Client(), Base: "http://sim", Symbol: "BTCUSDT",
		Interval: "1m", Page: 100, From: listed, Until: func() time.Time { return until }}
	if err := src.Init(); err != nil {
		b.Fatal(err)
	}
	r, err := slice.New(slice.Config[klines.Candle]{
		Stream: "sim/BTCUSDT/1m", Mode: checkpoint.CatchUp, Store: store, Provider: direct{},
		Source: src, Sink: sink, MaxBatch: maxBatch,
	})
	if err != nil {
		b.Fatal(err)
	}
	rep, err := r.Run(context.Background(), nil)
	if err != nil {
		b.Fatal(fmt.Errorf("run: %w", err))
	}
	return rep
}
