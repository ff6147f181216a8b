package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// group is a pg client: procs examples/ohlcv processes, each collecting
// one symbol of its own, that share the provider through one PostgreSQL
// database (budget.Config.Shares, pgstore's leases). With kill, the last
// one is SIGKILLed at half the run.
type group struct {
	procs int
	kill  bool
}

// remoteHost is the host name the process to be killed runs under, in a
// UTS namespace of its own when the harness may make one (root, unshare):
// the others then cannot see it died (a lease holder on this machine whose
// process is gone is dropped at once) and must wait for its lease to end,
// as for a process on another machine.
const remoteHost = "goodput-remote"

// killReport is what happened to the process killed mid-run.
type killReport struct {
	// Proc is its index (its symbol is symbols[Proc]); At the offset of the
	// SIGKILL from the cell's start.
	Proc int           `json:"proc"`
	At   time.Duration `json:"at_ns"`
	// Running says it had not exited when killed, and OKBefore counts its
	// 200s in the 2 s before: it was really collecting.
	Running  bool `json:"running"`
	OKBefore int  `json:"ok_before"`
	// Remote says it ran under a host name of its own (see remoteHost).
	Remote bool `json:"remote"`
	// Before is the share of the limit served in the 5 s before the kill;
	// After from one lease (3 s) after it to the end of the run.
	Before float64 `json:"before"`
	After  float64 `json:"after"`
	// Recover is the time from the kill until the successes within one
	// second first reach 90% of the limit again; Recovered is false if
	// they never do.
	Recover   time.Duration `json:"recover_ns"`
	Recovered bool          `json:"recovered"`
	// LeasesBefore and LeasesAfter are the shared record 1 s before the
	// kill and one lease and a second (4 s) after it.
	LeasesBefore string `json:"leases_before,omitempty"`
	LeasesAfter  string `json:"leases_after,omitempty"`
}

// lease is how long a share outlives its holder (budget's shareTTL).
const lease = 3 * time.Second

// run starts the processes against e.base with their store in e.dsn, one
// symbol each, for e.run (-timeout), kills the last at half the run if
// g.kill, waits for all, and returns a note on what they reported.
func (g group) run(ctx context.Context, e env) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, e.run+ohlcvGrace)
	defer cancel()
	remote := g.kill && canUnshare(ctx)
	procs := make([]*proc, g.procs)
	for i := range procs {
		procs[i] = startProc(ctx, e, i, remote && i == g.procs-1)
	}
	if g.kill {
		g.killLast(ctx, e, procs[g.procs-1], remote)
	}
	var sums []ohlcvSummary
	for i, p := range procs {
		<-p.done
		if p.err != nil {
			return "", fmt.Errorf("process %d: %v", i, p.err)
		}
		if g.kill && i == g.procs-1 {
			continue
		}
		if p.exit != nil {
			return "", fmt.Errorf("process %d (%s): %v: %s", i, symbols[i], p.exit, lastLine(p.stderr.String()))
		}
		var s ohlcvSummary
		if err := json.Unmarshal(p.stdout.Bytes(), &s); err != nil {
			return "", fmt.Errorf("process %d (%s): no summary: %s", i, symbols[i], lastLine(p.stderr.String()))
		}
		sums = append(sums, s)
	}
	return groupNote(sums), nil
}

// proc is one running ohlcv process.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{} // closed when it exited
	err            error         // it could not start
	exit           error         // its exit, nil for status 0
}

// startProc starts process i, collecting symbols[i], as a user runs it:
// 1m candles, 100 a page, since the listing, into PostgreSQL at e.dsn,
// -timeout the run. Under remote it runs with a host name of its own.
func startProc(ctx context.Context, e env, i int, remote bool) *proc {
	args := []string{"-base-url", e.base, "-symbols", symbols[i],
		"-interval", "1m", "-page", "100", "-since", listed.Format(time.RFC3339),
		"-store", e.dsn, "-timeout", e.run.String(), "-json"}
	p := &proc{done: make(chan struct{})}
	if remote {
		sh := append([]string{"-u", "sh", "-c", `hostname "$0" && exec "$@"`, remoteHost, e.bin}, args...)
		p.cmd = exec.CommandContext(ctx, "unshare", sh...)
	} else {
		p.cmd = exec.CommandContext(ctx, e.bin, args...)
	}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.WaitDelay = 5 * time.Second
	if p.err = p.cmd.Start(); p.err != nil {
		close(p.done)
		return p
	}
	go func() {
		defer close(p.done)
		p.exit = p.cmd.Wait()
	}()
	return p
}

// canUnshare reports whether a process can be given a host name of its
// own here (unshare -u: root, or a user namespace).
func canUnshare(ctx context.Context) bool {
	return exec.CommandContext(ctx, "unshare", "-u", "hostname", remoteHost).Run() == nil
}

// killLast waits until half the run has passed since the cell started,
// checks p still runs and was served in the 2 s before, reads the shared
// record, and SIGKILLs it; e.kill gets what was seen. It reads the shared
// record again one lease and a second later.
func (g group) killLast(ctx context.Context, e env, p *proc, remote bool) {
	k := e.kill
	k.Proc, k.Remote = g.procs-1, remote
	wait := func(at time.Duration) bool {
		select {
		case <-time.After(time.Until(e.rec.start.Add(at))):
			return true
		case <-ctx.Done():
			return false
		}
	}
	if !wait(e.run/2 - time.Second) {
		return
	}
	if v, err := e.pg.leases(ctx, e.dsn); err == nil {
		k.LeasesBefore = v.String()
	}
	if !wait(e.run / 2) {
		return
	}
	select {
	case <-p.done:
	default:
		k.Running = true
	}
	now := time.Since(e.rec.start)
	k.OKBefore = e.rec.served(k.Proc, now-2*time.Second, now)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	k.At = time.Since(e.rec.start)
	if wait(k.At + lease + time.Second) {
		if v, err := e.pg.leases(ctx, e.dsn); err == nil {
			k.LeasesAfter = v.String()
		}
	}
}

// groupNote sums what the surviving processes reported: candles,
// throttled answers, the rates they paced at by the end.
func groupNote(sums []ohlcvSummary) string {
	var candles int
	var throttled uint64
	rates := make([]string, len(sums))
	for i, s := range sums {
		candles += s.Candles
		throttled += s.Throttled
		rates[i] = fmt.Sprintf("%.1f", s.LearnedRate)
	}
	return fmt.Sprintf("%d candles, %d throttled, rates at the end %s/s", candles, throttled, strings.Join(rates, " "))
}

// runGroupCell is runCell's part for a pg client: a fresh database for
// the cell, the processes, and what they asked of PostgreSQL.
func runGroupCell(ctx context.Context, rw row, cl client, res *result, e env, o options) {
	name := "goodput_" + strings.ReplaceAll(filepath.Base(e.dir), "-", "_")
	dsn, err := o.pgAdmin.create(ctx, name)
	if err != nil {
		res.Failed, res.Note = true, fmt.Sprintf("create database %s: %v", name, err)
		return
	}
	defer func() { _ = o.pgAdmin.drop(context.WithoutCancel(ctx), name) }()
	e.dsn, e.pg, e.bin = dsn, o.pgAdmin, o.ohlcv
	res.Procs = cl.group.procs
	if cl.group.kill {
		res.Kill = &killReport{}
		e.kill = res.Kill
	}
	u := &dbUse{From: min(5*time.Second, e.run/4), Statements: o.pgAdmin.statements}
	var wg sync.WaitGroup
	var marks [3]dbCount // at the start, From, and the end of the run
	var merr [3]error
	marks[0], merr[0] = o.pgAdmin.count(ctx, name)
	wg.Go(func() {
		for i, at := range []time.Duration{u.From, e.run} {
			select {
			case <-time.After(time.Until(e.rec.start.Add(at))):
			case <-ctx.Done():
				return
			}
			marks[i+1], merr[i+1] = o.pgAdmin.count(ctx, name)
		}
	})
	note, cerr := cl.group.run(ctx, e)
	wg.Wait()
	res.Note = note
	if cerr != nil {
		res.Failed, res.Note = true, cerr.Error()
		return
	}
	if err := o.pgAdmin.settle(ctx, name); err != nil {
		fmt.Fprintf(os.Stderr, "goodput-http: %s: %v\n", name, err)
	}
	end, err := o.pgAdmin.count(ctx, name)
	for _, e := range merr {
		err = cmpErr(err, e)
	}
	if err != nil {
		res.Note += fmt.Sprintf(" (database counts: %v)", err)
		return
	}
	u.Whole, u.Steady = end.sub(marks[0]), marks[2].sub(marks[1])
	u.WholeSeconds = float64(res.Procs) * e.run.Seconds()
	u.SteadySeconds = float64(res.Procs) * (e.run - u.From).Seconds()
	if k := res.Kill; k != nil && k.At > 0 {
		// The killed process was not there for the rest of the run.
		gone := (e.run - k.At).Seconds()
		u.WholeSeconds -= gone
		u.SteadySeconds -= gone
	}
	res.DB = u
}

// cmpErr returns the first non-nil of a and b.
func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// dbUse is what a pg client's processes asked of PostgreSQL.
type dbUse struct {
	// Whole counts from the start of the cell until every process exited
	// (start-up, migrations and shutdown included); Steady from From into
	// the run until its end. pg_stat_database's Xacts of Steady lag by up
	// to a second: they are not reported per second.
	Whole  dbCount `json:"whole"`
	Steady dbCount `json:"steady"`
	// From is when the steady window starts: the processes have started
	// and migrated.
	From time.Duration `json:"from_ns"`
	// WholeSeconds and SteadySeconds are the process-seconds the counts
	// are divided by (the killed process's counted until it died).
	WholeSeconds  float64 `json:"whole_process_s"`
	SteadySeconds float64 `json:"steady_process_s"`
	// Statements says the server counted statements (pg_stat_statements).
	Statements bool `json:"statements"`
}
