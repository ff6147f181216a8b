// Package forage is an embeddable SDK for budgeted collection: pulling data
// from third-party providers whose rate limits are unknown or only partly
// known, as fast as the provider allows, never banned, never losing or
// duplicating data, and resuming exactly where a run stopped.
//
// The root package holds no code; it is the tutorial. forage is a set of small
// packages that compose, each usable on its own:
//
//   - [github.com/forage-go/forage/gcra]: precise, lock-free pacing (GCRA,
//     ITU-T I.371). Reach for it when you know the rate and need to hold it.
//
// See the README for the full map of packages and how one request attempt
// flows through them.
package forage
