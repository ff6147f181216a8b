package slice

// GapReasonForTest exposes gapReason to the external tests.
var GapReasonForTest = gapReason
