# forage: the commands a developer and CI use.
#   make test     lint + race tests in every module of the repo + release-check
#                 (what .ci/run calls)
#   make release-check  every nested module built as a user would get it:
#                 GOWORK=off, the core served at the release version from a
#                 file-based module proxy made from the tree
#   make bench    the hot-path benchmarks, with allocations
#   make lint     gofmt check + vet + staticcheck (pinned; scripts/staticcheck.sh
#                 installs it on first use) in every module
#   make goodput  the provider-policy simulation tables (budget, and bench/ beside peers)
#   make untuned  the simulated table of providers forage was not tuned on
#                 (concurrency limits, sliding logs, per-minute windows, big
#                 buckets, high latency, queues, every Retry-After form,
#                 limits that change; budget/untuned_test.go). About 15 s.
#   make sweep    120 providers drawn at random (limit, allowance, workers,
#                 latency, jitter, Retry-After or none, a ban at five or none),
#                 30 simulated seconds each: bans and goodput to compare before
#                 and after a change (budget/sweep_test.go). A few seconds.
#   make goodput-http  the same policies in real time over loopback HTTP: the
#                 built examples/ohlcv (1 and 3 symbols), a budget.Transport
#                 crawl and the peers, 30 s and 120 s runs (see
#                 bench/cmd/goodput-http). About 43 minutes at the default
#                 -parallel 4 (the 200/s row alone, after the others); not part of make test. Take numbers for the
#                 README on a quiet machine.
#   make goodput-far  the 30 s table against a provider across an ocean
#                 (100 ms + up to 40 ms of latency, -latency/-jitter of
#                 bench/cmd/goodput-http): ohlcv 1 and 3 symbols, the crawl
#                 and AWS adaptive. About 10 minutes; not part of make test.
#   make goodput-random  24 providers drawn at random, in real time: limit
#                 (4-60/s, a fifth 2-12/s), GCRA burst or a fixed window, 429
#                 with or without Retry-After, 503 or a slow-down, a ban at
#                 five or none, usage headers, random 502/503 noise, a limit
#                 that halves, and each row's own latency (1-60 ms plus up to
#                 a third), all named in the row. ohlcv-3 and the crawl, 30 s
#                 each, then per client the goodput's mean, tenth percentile
#                 and median and the rows banned (-random of
#                 bench/cmd/goodput-http; -seed draws other providers).
#                 24 rows x 2 clients x 30 s / 3 in parallel: about 9 minutes;
#                 not part of make test.
#   make goodput-pg  N = 1, 3 and 8 examples/ohlcv processes sharing one
#                 provider through one throwaway PostgreSQL (scripts/pg-test.sh,
#                 with pg_stat_statements loaded), one symbol each, 30 s per
#                 cell, against gcra 17/s burst 1, gcra 50/s burst 10, gcra 15/s
#                 that bans after 5 refusals a minute and a fixed window 200/10s,
#                 none of which they are told; 3 and 8
#                 again with one process SIGKILLed at half the run. Goodput,
#                 refused, bans, each process's part of the work and the
#                 statements each process sends per second (the pg clients
#                 of bench/cmd/goodput-http). About 11 minutes, one cell at a
#                 time; not part of make test.
#   make ui-check  the admin status page in a real headless Chromium (Debian's
#                 package, installed if missing): a screenshot, and a check
#                 that the providers' charts rendered (scripts/ui-check.sh).
#                 About a minute; not part of make test.

GO      ?= go
# Every module in the repository: the root and any nested go.mod (pgstore, bench, ...).
MODULES := $(shell find . -name go.mod -not -path './.git/*' -exec dirname {} \; | sort)

.PHONY: test bench lint goodput untuned sweep goodput-http goodput-far goodput-random goodput-pg vet release-check ui-check

# pgstore's tests run against a throwaway PostgreSQL that scripts/pg-test.sh
# installs (if needed), starts on loopback in a temp directory, and removes.
test: lint release-check
	@set -e; for m in $(MODULES); do \
		echo "== go test -race $$m"; \
		case $$m in \
		./pgstore|./examples/ohlcv) (cd $$m && bash $(CURDIR)/scripts/pg-test.sh $(GO) test -race -count=1 ./...) ;; \
		*) (cd $$m && $(GO) test -race -count=1 ./...) ;; \
		esac; \
	done

release-check:
	@bash scripts/release-check.sh

vet:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) vet ./...); done

lint: vet
	@bad=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$bad" ]; then echo "not gofmt'ed:"; echo "$$bad"; exit 1; fi
	@set -e; for m in $(MODULES); do \
		echo "== staticcheck $$m"; \
		(cd $$m && bash $(CURDIR)/scripts/staticcheck.sh ./...); \
	done

bench:
	@set -e; for m in $(MODULES); do \
		case $$m in \
		./pgstore|./examples/ohlcv) (cd $$m && bash $(CURDIR)/scripts/pg-test.sh $(GO) test -run '^$$' -bench . -benchmem ./...) ;; \
		*) (cd $$m && $(GO) test -run '^$$' -bench . -benchmem ./...) ;; \
		esac; \
	done

goodput:
	$(GO) test -count=1 -run 'TestGoodput$$|TestGoodputShort' -v ./budget
	cd bench && $(GO) test -count=1 -run TestPeers -v .

untuned:
	UNTUNED=1 $(GO) test -count=1 -run TestUntuned -v ./budget

sweep:
	SWEEP=$${SWEEP:-120} $(GO) test -count=1 -run 'TestSweep$$' -v ./budget

goodput-http:
	cd bench && $(GO) run ./cmd/goodput-http -dur 30s,120s -md

goodput-far:
	cd bench && $(GO) run ./cmd/goodput-http -latency 100ms -jitter 40ms -clients ohlcv-1,ohlcv-3,crawl,aws -dur 30s -md

goodput-random:
	cd bench && $(GO) run ./cmd/goodput-http -random 24 -dur 30s -parallel 3 -md

goodput-pg:
	cd bench && FORAGE_PG_OPTS="-c shared_preload_libraries=pg_stat_statements" \
		bash $(CURDIR)/scripts/pg-test.sh $(GO) run ./cmd/goodput-http \
		-clients pg-1,pg-3,pg-8,pg-3-kill,pg-8-kill -dur 30s -parallel 1 -md

ui-check:
	@bash scripts/ui-check.sh
