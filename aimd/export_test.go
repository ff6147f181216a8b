package aimd

// ConfigOf returns the configuration in force in c, defaults filled in, for
// the tests of package aimd_test.
func ConfigOf(c *Controller) Config { return c.cfg }

// EchoFloor is echoFloor, for the tests of package aimd_test.
const EchoFloor = echoFloor

// SpendOver is spendOver, for the tests of package aimd_test.
var SpendOver = spendOver
