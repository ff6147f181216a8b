package bench_test

import "github.com/forage-go/forage/bench/internal/clients"

// peerClients returns the columns: forage first (the one held to targets),
// then x/time/rate at three fixed guesses of the limit, then the AWS SDK's
// adaptive mode.
func peerClients() []client {
	return []client{
		{"forage", "forage (zero Config)", clients.Forage},
		{"rate25", "x/time/rate 25/s", clients.Rate(25)},
		{"rate50", "x/time/rate 50/s", clients.Rate(50)},
		{"rate100", "x/time/rate 100/s", clients.Rate(100)},
		{"aws", "AWS SDK adaptive", clients.AWS},
	}
}
