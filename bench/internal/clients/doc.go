// Package clients holds the ways of calling a provider that bench measures:
// forage's own ([Forage], one budget Provider; [Crawl], budget's
// http.RoundTripper) and its peers ([Rate], a hand-written client pacing on
// golang.org/x/time/rate at a fixed guess of the limit; [AWS], the AWS SDK
// for Go v2's adaptive retry mode).
//
// Every client is a [Func]: it drives a number of workers, each sending one
// request at a time to one URL through an http.RoundTripper, until its
// context ends. The same clients run in simulated time (bench's TestPeers,
// over providertest's in-memory transport inside a testing/synctest bubble,
// where every timer they make is fake) and in real time (the goodput-http
// command, over loopback HTTP), so the two tables compare like with like.
//
// The package is internal to the bench module: a measurement fixture, not
// an API.
package clients
