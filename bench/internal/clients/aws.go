package clients

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
	_ "unsafe" // for go:linkname, see awsSleep

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// AWS calls the provider through the AWS SDK for Go v2's own retry loop,
// the retry.Attempt finalize middleware an SDK client installs, with one
// retry.AdaptiveMode shared by the workers as a client shares its Retryer.
// Per attempt the middleware takes GetAttemptToken (the adaptive client-side
// rate limiter: unlimited until the first throttle, then CUBIC), sends, and
// releases the token with the attempt's error, which feeds the limiter
// throttled or not; retryable errors are retried up to 3 attempts with the
// standard retryer's exponential full-jitter backoff (legacy mode: it does
// not read Retry-After) and its retry quota. An operation that fails anyway
// is dropped and the worker sends the next one at once.
func AWS(ctx context.Context, rt http.RoundTripper, url string, workers int) {
	mode := retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) {
		o.Throttles = append(o.Throttles, statusThrottle)
		o.StandardOptions = append(o.StandardOptions, func(so *retry.StandardOptions) {
			so.Throttles = append(so.Throttles, statusThrottle)
			so.Retryables = append(so.Retryables, statusRetryable)
		})
	})
	mw := retry.NewAttemptMiddleware(mode, func(r any) any { return r })
	next := middleware.FinalizeHandlerFunc(sendAWS(rt, url))
	each(workers, func(limit int) {
		for n := 0; n < limit && ctx.Err() == nil; n++ {
			_, _, _ = mw.HandleFinalize(ctx, middleware.FinalizeInput{Request: struct{}{}}, next)
		}
	})
}

// sendAWS returns the innermost handler of the AWS stack: one attempt, with a
// response other than 200 turned into the error an SDK deserializer returns,
// an awshttp.ResponseError carrying the HTTP status around a
// smithy.GenericAPIError.
func sendAWS(rt http.RoundTripper, url string) func(context.Context, middleware.FinalizeInput) (middleware.FinalizeOutput, middleware.Metadata, error) {
	return func(ctx context.Context, _ middleware.FinalizeInput) (middleware.FinalizeOutput, middleware.Metadata, error) {
		var md middleware.Metadata
		resp, err := Get(ctx, rt, url)
		if err != nil {
			return middleware.FinalizeOutput{}, md, &smithyhttp.RequestSendError{Err: err}
		}
		if resp.StatusCode != http.StatusOK {
			return middleware.FinalizeOutput{}, md, &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
				Response: &smithyhttp.Response{Response: resp},
				Err:      &smithy.GenericAPIError{Code: http.StatusText(resp.StatusCode), Message: fmt.Sprintf("status %d", resp.StatusCode)},
			}}
		}
		return middleware.FinalizeOutput{Result: resp}, md, nil
	}
}

// statusThrottle tells the adaptive mode which answers are throttles: AWS
// services name them by error code (ThrottlingException, SlowDown, ...); this
// provider by status, 429, 503 or 418.
var statusThrottle = retry.IsErrorThrottleFunc(func(err error) aws.Ternary {
	if s, ok := httpStatus(err); ok && Refusal(s) {
		return aws.TrueTernary
	}
	return aws.UnknownTernary
})

// statusRetryable makes the throttles retryable, as the SDK's default
// retryables make its throttle codes retryable (503 already is, by status).
var statusRetryable = retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
	return statusThrottle(err)
})

// httpStatus returns the HTTP status err carries, if any.
func httpStatus(err error) (int, bool) {
	var v interface{ HTTPStatusCode() int }
	if !errors.As(err, &v) {
		return 0, false
	}
	return v.HTTPStatusCode(), true
}

// awsSleep is the AWS SDK's sleep hook, internal/sdk.SleepWithContext, which
// AdaptiveMode.GetAttemptToken and the retry middleware sleep through. The
// SDK exports no way to set it, hence the linkname.
//
//go:linkname awsSleep github.com/aws/aws-sdk-go-v2/internal/sdk.SleepWithContext
var awsSleep func(context.Context, time.Duration) error

// init floors the SDK's sleeps at 1ns. GetAttemptToken loops "refill, try to
// take a token, sleep (1 - tokens) / fillRate"; when float rounding leaves
// the bucket at 0.9999999999 tokens that sleep truncates to 0. On a real
// clock the loop's own run time refills the bucket and the next turn
// succeeds; under synctest the clock stands still until every goroutine
// blocks, so the loop would spin forever at one instant. A 1ns floor is
// shorter than any real turn of that loop, so the SDK's pacing is unchanged.
func init() {
	sleep := awsSleep
	if sleep == nil {
		panic("clients: the AWS SDK no longer has internal/sdk.SleepWithContext (go:linkname): re-check bench/internal/clients/aws.go after the SDK upgrade")
	}
	awsSleep = func(ctx context.Context, d time.Duration) error {
		return sleep(ctx, max(d, time.Nanosecond))
	}
}
