// Command uidemo serves the admin status page ([admin.Handler]) of a
// scheduler whose budget registry has had a few seconds of scripted
// traffic against simulated providers, so that its charts have data; and
// it checks what a headless browser made of the page. scripts/ui-check.sh
// (make ui-check) runs both around a headless Chromium.
//
// Serve: uidemo -addr 127.0.0.1:0 -traffic 20s -ready FILE [-for 3m]
// writes the page's URL to FILE once the traffic is over, and serves until
// -for has passed or it is signalled.
//
// Check: uidemo -check -dom DOM.html -png SHOT.png fails unless the DOM
// Chromium dumped holds the providers' charts (SVG polylines with points)
// and the screenshot is not blank: it shows the rate line's blue and the
// refusals' red.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/png"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/forage-go/forage"
	"github.com/forage-go/forage/admin"
	"github.com/forage-go/forage/budget"
	"github.com/forage-go/forage/schedule"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "the loopback address to serve on")
	traffic := flag.Duration("traffic", 20*time.Second, "how long the scripted traffic runs before the page is ready")
	ready := flag.String("ready", "", "the file to write the page's URL to once the traffic is over")
	serveFor := flag.Duration("for", 3*time.Minute, "how long to serve before exiting")
	check := flag.Bool("check", false, "check -dom and -png instead of serving")
	dom := flag.String("dom", "", "with -check: the DOM Chromium dumped")
	shot := flag.String("png", "", "with -check: the screenshot Chromium took")
	flag.Parse()
	var err error
	if *check {
		err = checkPage(*dom, *shot)
	} else {
		err = serve(*addr, *traffic, *ready, *serveFor)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "uidemo:", err)
		os.Exit(1)
	}
}

// serve builds the scheduler, its registry and the admin handler, runs the
// traffic, then serves the handler until serveFor has passed or a signal
// comes.
func serve(addr string, traffic time.Duration, ready string, serveFor time.Duration) error {
	if !strings.HasPrefix(addr, "127.") && !strings.HasPrefix(addr, "localhost:") && !strings.HasPrefix(addr, "[::1]:") {
		return fmt.Errorf("-addr %q: serve on loopback only", addr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, serveFor)
	defer cancel()

	reg, err := budget.NewRegistry(budget.RegistryConfig{Overrides: map[string]budget.Config{
		"api.kraken.com": {Limits: []budget.Limit{{Name: "weight/1m", Count: 900, Per: time.Minute}}},
	}})
	if err != nil {
		return err
	}
	sched, err := schedule.New(schedule.Config{Budget: reg}, schedule.NewMemoryJobStore(),
		schedule.WorkerFunc(func(context.Context, schedule.Job) (schedule.Result, error) { return schedule.Result{}, nil }))
	if err != nil {
		return err
	}
	if err := addJobs(ctx, sched); err != nil {
		return err
	}
	h, err := admin.New(sched, admin.Config{SampleEvery: 200 * time.Millisecond})
	if err != nil {
		return err
	}
	go func() { _ = h.Run(ctx) }()

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	drive(ctx, reg, traffic)
	if ready != "" {
		if err := os.WriteFile(ready, []byte("http://"+ln.Addr().String()+"/\n"), 0o644); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}

// addJobs adds a few jobs in a few states.
func addJobs(ctx context.Context, s *schedule.Scheduler) error {
	for i, spec := range []schedule.Spec{
		{Provider: "api.binance.com", Kind: schedule.KindIncremental, Stream: "BTCUSDT/1m", Interval: time.Minute},
		{Provider: "api.binance.com", Kind: schedule.KindBackfill, Stream: "ETHUSDT/1m"},
		{Provider: "api.kraken.com", Kind: schedule.KindIncremental, Stream: "XBTUSD/1h", Interval: time.Hour},
		{Provider: "api.coinbase.com", Kind: schedule.KindBackfill, Stream: "BTC-USD/1d"},
		{Provider: "api.example.com", Kind: schedule.KindIncremental, Stream: "<b>not bold</b>", Interval: time.Hour},
	} {
		j, err := s.Upsert(ctx, spec)
		if err != nil {
			return err
		}
		if i == 3 {
			if _, err := s.SetPaused(ctx, j.ID, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// simulated is a provider's secret limit: at most limit requests in each
// second (a fixed window), a 429 beyond it, and a 503 now and then.
type simulated struct {
	mu     sync.Mutex
	limit  int
	faults float64
	window time.Time
	n      int
}

// attempt is one request to the simulated provider.
func (s *simulated) attempt(context.Context) forage.Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().Truncate(time.Second)
	if !now.Equal(s.window) {
		s.window, s.n = now, 0
	}
	if s.n++; s.n > s.limit {
		return forage.Outcome{Status: http.StatusTooManyRequests, Latency: 2 * time.Millisecond}
	}
	if rand.Float64() < s.faults {
		return forage.Outcome{Status: http.StatusServiceUnavailable, Latency: 5 * time.Millisecond}
	}
	return forage.Outcome{Status: http.StatusOK, Latency: 3 * time.Millisecond}
}

// drive calls four simulated providers through reg for d: one whose limit
// is discovered, one with a known limit, one that fails now and then, and
// one an operator pauses partway.
func drive(ctx context.Context, reg *budget.Registry, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	sims := map[string]*simulated{
		"api.binance.com":  {limit: 40},
		"api.kraken.com":   {limit: 1000},
		"api.coinbase.com": {limit: 12, faults: 0.05},
		"api.example.com":  {limit: 25},
	}
	var wg sync.WaitGroup
	for key, sim := range sims {
		p, err := reg.Get(key)
		if err != nil {
			continue
		}
		for range 4 {
			wg.Go(func() {
				for ctx.Err() == nil {
					err := p.Do(ctx, nil, sim.attempt, budget.CallOption{NoRetry: true})
					if r, ok := budget.ReasonOf(err); ok && r == forage.ReasonPaused {
						sleep(ctx, 200*time.Millisecond)
					}
				}
			})
		}
	}
	wg.Go(func() {
		if sleep(ctx, d*6/10) {
			_ = reg.SetStatus(context.Background(), "api.example.com", budget.StatusPaused, "key revoked: rotating credentials")
		}
	})
	wg.Wait()
}

// sleep waits d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// checkPage fails unless the DOM holds at least three charts whose rate
// lines have ten points or more, and the screenshot shows the rate line's
// blue and the refusals' red on a page that is not blank.
func checkPage(domFile, pngFile string) error {
	dom, err := os.ReadFile(domFile)
	if err != nil {
		return err
	}
	charts := 0
	for _, m := range regexp.MustCompile(`<polyline[^>]*class="rate"[^>]*points="([^"]*)"`).FindAllSubmatch(dom, -1) {
		if len(strings.Fields(string(m[1]))) >= 10 {
			charts++
		}
	}
	if charts < 3 {
		return fmt.Errorf("%s: %d charts with a rate line of 10 points or more; want at least 3", domFile, charts)
	}
	if !strings.Contains(string(dom), "key revoked") || strings.Contains(string(dom), "<b>not bold</b>") {
		return fmt.Errorf("%s: the operator's pause is not shown, or a stream name is not escaped", domFile)
	}
	f, err := os.Open(pngFile)
	if err != nil {
		return err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return fmt.Errorf("%s: %w", pngFile, err)
	}
	blue, red, ink := count(img)
	b := img.Bounds()
	fmt.Printf("uidemo: %d charts in the DOM; screenshot %dx%d: %d rate-blue, %d refusal-red, %d non-white pixels\n",
		charts, b.Dx(), b.Dy(), blue, red, ink)
	switch {
	case ink < b.Dx()*b.Dy()/100:
		return errors.New(pngFile + ": the screenshot is (almost) blank")
	case blue < 100:
		return errors.New(pngFile + ": no rate line drawn (too few #36c pixels)")
	case red < 60: // the legend's swatch alone has 30
		return errors.New(pngFile + ": no refusals line drawn (too few #c22 pixels)")
	}
	return nil
}

// count counts the pixels of img near the rate line's blue (#36c), near the
// refusals' red (#c22), and not white.
func count(img image.Image) (blue, red, ink int) {
	near := func(r, g, b, wr, wg, wb uint32) bool {
		d := func(a, w uint32) bool { return a+24 >= w && a <= w+24 }
		return d(r, wr) && d(g, wg) && d(b, wb)
	}
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			r, g, b = r>>8, g>>8, b>>8
			switch {
			case near(r, g, b, 0x33, 0x66, 0xcc):
				blue++
			case near(r, g, b, 0xcc, 0x22, 0x22):
				red++
			}
			if r < 240 || g < 240 || b < 240 {
				ink++
			}
		}
	}
	return blue, red, ink
}
