package forage

// MaxRetryAfter is the cap on the pauses ParseRetryAfter and ParseQuota
// report, for the tests of package forage_test.
const MaxRetryAfter = maxRetryAfter
