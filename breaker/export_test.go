package breaker

// The reasons of the edges other than closed → open, and the half-open
// refusal, for the tests of package breaker_test.
const (
	ReasonOpenTimeout     = reasonOpenTimeout
	ReasonProbeFailed     = reasonProbeFailed
	ReasonProbesSucceeded = reasonProbesSucceeded
)

// ErrTooManyProbes is what Allow returns while the half-open breaker's
// probes are all in flight.
var ErrTooManyProbes = errTooManyProbes
