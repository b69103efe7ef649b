package sim

import (
	"math"
	"time"
)

// awsAdaptive is a model of the client-side rate limiter of the AWS SDKs'
// adaptive retry mode, as aws-sdk-go-v2 writes it (aws/retry,
// adaptive_ratelimit.go and adaptive_token_bucket.go): a token bucket that
// lets everything through until the first throttling answer, then fills at
// a rate set by CUBIC — cut to 0.7 × the measured send rate on each
// throttle, then growing as 0.4·(t − K)³ + the rate at the last throttle —
// never above twice the send rate measured in half-second bins (smoothed,
// 0.8), never below 0.5 tokens/s. Each attempt takes one token; a client
// without one waits the time the bucket needs for it and asks again.
//
// The SDK's clock is the wall clock; here it is the simulation's, in
// seconds from the run's start, and every throttle the SDK would see is a
// rejection of the simulated server.
type awsAdaptive struct {
	enabled                                      bool
	fillRate, calculatedRate, measuredTxRate     float64
	lastRefilled, lastTxRateBucket, lastThrottle float64
	lastMaxRate, timeWindow                      float64
	requestCount                                 int64
	tokens, capacity                             float64
	refilled                                     bool
}

// The constants of aws-sdk-go-v2's newAdaptiveRateLimit.
const (
	awsSmooth        = 0.8
	awsBeta          = 0.7
	awsScaleConstant = 0.4
	awsMinFillRate   = 0.5
	awsMinCapacity   = 1
)

func newAWSAdaptive() awsAdaptive { return awsAdaptive{} }

// acquire takes a token at now, or returns how long to wait before asking
// again.
func (a *awsAdaptive) acquire(now time.Duration) (ok bool, wait time.Duration) {
	if !a.enabled {
		return true, 0
	}
	a.refill(now)
	if a.tokens < 1 {
		// Rounded up, to at least a microsecond: the SDK sleeps on the wall
		// clock, which always moves; a wait rounded down to 0 here would
		// ask again at the same instant, forever.
		return false, max(time.Microsecond, time.Duration(math.Ceil((1-a.tokens)/a.fillRate*float64(time.Second))))
	}
	a.tokens--
	return true, 0
}

// update is the SDK's Update: the answer to an attempt came at now.
func (a *awsAdaptive) update(now time.Duration, throttled bool) {
	t := now.Seconds()
	a.updateMeasuredRate(t)
	if throttled {
		rate := a.measuredTxRate
		if a.enabled {
			rate = math.Min(a.measuredTxRate, a.fillRate)
		}
		a.lastMaxRate = rate
		a.calculateTimeWindow()
		a.lastThrottle = t
		a.calculatedRate = rate * awsBeta
		a.enabled = true
	} else {
		a.calculateTimeWindow()
		a.calculatedRate = awsScaleConstant*math.Pow(t-a.lastThrottle-a.timeWindow, 3) + a.lastMaxRate
	}
	newRate := math.Min(a.calculatedRate, 2*a.measuredTxRate)
	a.refill(now)
	a.fillRate = math.Max(newRate, awsMinFillRate)
	a.capacity = math.Max(newRate, awsMinCapacity)
	a.tokens = math.Min(a.tokens, a.capacity)
}

func (a *awsAdaptive) calculateTimeWindow() {
	a.timeWindow = math.Pow(a.lastMaxRate*(1-awsBeta)/awsScaleConstant, 1./3.)
}

func (a *awsAdaptive) updateMeasuredRate(t float64) {
	bucket := math.Floor(t*2) / 2
	a.requestCount++
	if bucket > a.lastTxRateBucket {
		current := float64(a.requestCount) / (bucket - a.lastTxRateBucket)
		a.measuredTxRate = current*awsSmooth + a.measuredTxRate*(1-awsSmooth)
		a.requestCount = 0
		a.lastTxRateBucket = bucket
	}
}

func (a *awsAdaptive) refill(now time.Duration) {
	t := now.Seconds()
	if !a.refilled {
		a.lastRefilled, a.refilled = t, true
		return
	}
	a.tokens = math.Min(a.tokens+(t-a.lastRefilled)*a.fillRate, a.capacity)
	a.lastRefilled = t
}
