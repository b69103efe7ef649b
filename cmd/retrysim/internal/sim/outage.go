package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/backoff"
)

// Defaults of the outage experiment, as DefaultOutage returns them.
const (
	DefaultOutageClients  = 10000
	DefaultOutageSpread   = time.Second
	DefaultOutageDuration = 30 * time.Second
	DefaultOutageCapacity = 1000
	DefaultOutageBucket   = 100 * time.Millisecond
)

// OutageConfig is one run of the outage experiment.
//
// Clients each have one request, first sent at a time drawn uniformly from
// [0, Spread). The server rejects every request that arrives before Outage;
// from then on it admits at most Capacity requests in each second (counted
// from Outage) and rejects the rest at once. A client whose request is
// rejected waits its strategy's next delay and sends it again, with no
// attempt limit, until one is admitted. Requests and answers each take a
// Latency draw.
type OutageConfig struct {
	Clients  int
	Spread   time.Duration
	Outage   time.Duration
	Capacity int           // admitted requests per second after the outage
	Bucket   time.Duration // width of the bins of OutageResult.Load
	Strategy Strategy
	Latency  Latency // zero means the defaults, |Normal(10 ms, 2 ms)|
	Seed     uint64
	Run      int
}

// DefaultOutage returns the experiment's defaults with the given strategy:
// 10,000 clients spread over 1 s, a 30 s outage, then 1,000 requests/s, load
// counted in 100 ms bins.
func DefaultOutage(s Strategy) OutageConfig {
	return OutageConfig{
		Clients: DefaultOutageClients, Spread: DefaultOutageSpread, Outage: DefaultOutageDuration,
		Capacity: DefaultOutageCapacity, Bucket: DefaultOutageBucket, Strategy: s,
	}
}

func (c *OutageConfig) validate() error {
	switch {
	case c.Clients < 1:
		return errors.New("outage: clients must be at least 1")
	case c.Capacity < 1:
		return errors.New("outage: capacity must be at least 1 request/s")
	case c.Spread < 0 || c.Outage < 0:
		return errors.New("outage: spread and outage must not be negative")
	case c.Bucket <= 0:
		return errors.New("outage: the load bin must be positive")
	}
	return nil
}

// OutageResult is what one run measured.
type OutageResult struct {
	Calls      int           // requests the server received
	Admitted   int           // requests it admitted: one per client served
	GaveUp     int           // clients whose request was given up (a retry quota refused a retry)
	PeakRPS    int           // most requests received in any 1 s window after the outage
	Completion time.Duration // when the last client served received its success
	Load       []int         // requests received in each Bucket, from time 0
}

// The events of an outage run. Without feedback (no limiter, quota or
// adaptive mode) a rejection, the wait and the next request follow one
// another with nothing for the client to decide, and one arrival event
// covers them; with it, the client hears the answer (and reports it) and
// asks its limiter before each request.
const (
	arrives  uint8 = iota // a request reaches the server
	answered              // its answer reaches the client; value 1: a success
	ready                 // the client's wait is over: it asks its limiter, then sends
)

// rejection is the server's answer to a request it does not admit, as the
// clients' limiters see it: a 429, the server asking to slow down, which a
// limiter acts on at once (a 503 it would act on only while it is most
// answers; see retry.LimiterConfig.OutageShare).
type rejection struct{}

func (rejection) Error() string       { return "429 Too Many Requests" }
func (rejection) HTTPStatusCode() int { return 429 }

// epoch is time 0 of a run, for the limiters, which read times.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// RunOutage runs the experiment once, or returns an error if c has fewer
// than 1 client or request/s of capacity, a negative spread or outage, a
// bin that is not positive, or an invalid quota or limiter. Any number may
// run at once.
func RunOutage(c OutageConfig) (OutageResult, error) {
	if err := c.validate(); err != nil {
		return OutageResult{}, err
	}
	lat := c.Latency.orDefault()
	net, jitter := streams(c.Seed, c.Clients, c.Run)
	cl, err := newClients(c.Strategy, c.Clients, jitter, nil)
	if err != nil {
		return OutageResult{}, err
	}
	failures := make([]int, c.Clients)
	prev := make([]time.Duration, c.Clients)
	q := queue{ev: make([]event, 0, c.Clients)}
	for i := range c.Clients {
		first := time.Duration(net.Int64N(int64(c.Spread) + 1))
		l := lat.draw(net)
		if cl.waits() {
			cl.reqLat[i] = l
			q.push(event{at: first, client: int32(i), kind: ready})
		} else {
			q.push(event{at: first + l, client: int32(i), kind: arrives})
		}
	}
	feedback := c.Strategy.feedback()
	var (
		res    OutageResult
		window = int64(-1) // the second after the outage being counted
		inWin  int         // admissions in it
		recent fifo        // arrivals after the outage, within the last second
	)
	for q.len() > 0 {
		e := q.peek()
		i := e.client
		switch e.kind {
		case answered:
			if e.value == 1 {
				cl.succeeded(i, e.at)
				q.pop()
				continue
			}
			if !cl.failed(i, e.at) {
				res.GaveUp++
				q.pop()
				continue
			}
			q.replace(event{at: e.at + cl.delay[i], client: i, kind: ready})
			continue
		case ready:
			if wait, ok := cl.admit(i, e.at); !ok {
				q.replace(event{at: e.at + wait, client: i, kind: ready})
			} else {
				q.replace(event{at: e.at + wait + cl.reqLat[i], client: i, kind: arrives})
			}
			continue
		}
		res.Calls++
		if b := int(e.at / c.Bucket); b < len(res.Load) {
			res.Load[b]++
		} else {
			res.Load = append(res.Load, make([]int, b+1-len(res.Load))...)
			res.Load[b] = 1
		}
		admit := false
		if e.at >= c.Outage {
			recent.push(e.at)
			recent.dropUntil(e.at - time.Second)
			res.PeakRPS = max(res.PeakRPS, recent.len())
			if w := int64((e.at - c.Outage) / time.Second); w != window {
				window, inWin = w, 0
			}
			if inWin < c.Capacity {
				inWin++
				admit = true
			}
		}
		if admit {
			res.Admitted++
			answer := e.at + lat.draw(net)
			res.Completion = max(res.Completion, answer)
			if feedback {
				q.replace(event{at: answer, client: i, kind: answered, value: 1})
			} else {
				q.pop()
			}
			continue
		}
		answer := e.at + lat.draw(net)
		failures[i]++
		prev[i] = c.Strategy.Backoff.Delay(failures[i], prev[i], jitter)
		if !feedback {
			// The rejection, the wait and the next request in one event.
			q.replace(event{at: answer + prev[i] + lat.draw(net), client: i, kind: arrives})
			continue
		}
		cl.delay[i], cl.reqLat[i] = prev[i], lat.draw(net)
		q.replace(event{at: answer, client: i, kind: answered})
	}
	return res, nil
}

// clients holds what the clients of a run keep beside their backoff: their
// limiters, their adaptive-mode buckets, the retry quota.
type clients struct {
	limiters  []*retry.Limiter // one per client, or the same one for all
	aws       []awsAdaptive
	awsShared bool           // aws has one bucket, for all
	awsQuota  []*retry.Quota // the adaptive mode's retry quota, per client; nil when shared
	quota     *retry.Quota   // shared
	// A failed client's next wait and its next request's network time,
	// drawn when the server rejected its request.
	delay, reqLat []time.Duration
}

// newClients sets up n clients of s; their limiters draw from src, the
// run's jitter stream (a run is one goroutine: no lock is needed), and take
// for overload what overload says (nil: the limiter's default).
func newClients(s Strategy, n int, src backoff.Source, overload func(error) bool) (*clients, error) {
	c := &clients{delay: make([]time.Duration, n), reqLat: make([]time.Duration, n)}
	var err error
	if s.Quota != nil {
		if c.quota, err = retry.NewQuota(*s.Quota); err != nil {
			return nil, fmt.Errorf("outage: %s: %w", s.Name, err)
		}
	}
	if s.Limiter != nil {
		c.limiters = make([]*retry.Limiter, n)
		for i := range c.limiters {
			if i > 0 && s.SharedLimiter {
				c.limiters[i] = c.limiters[0]
				continue
			}
			lc := *s.Limiter
			lc.Rand = src
			if overload != nil {
				lc.Overload = overload
			}
			if c.limiters[i], err = retry.NewLimiter(lc); err != nil {
				return nil, fmt.Errorf("outage: %s: %w", s.Name, err)
			}
		}
	}
	if s.AWSAdaptive {
		if s.SharedLimiter {
			// One bucket, and no quota: the rate control alone, to set
			// against the shared retry.Limiter.
			c.aws, c.awsShared = make([]awsAdaptive, 1), true
			return c, nil
		}
		c.aws = make([]awsAdaptive, n)
		c.awsQuota = make([]*retry.Quota, n)
		for i := range c.awsQuota {
			c.awsQuota[i], _ = retry.NewQuota(AWSStandardQuota()) // valid
		}
	}
	return c, nil
}

// bucket returns client i's adaptive-mode bucket.
func (c *clients) bucket(i int32) *awsAdaptive {
	if c.awsShared {
		return &c.aws[0]
	}
	return &c.aws[i]
}

// waits reports whether clients ask something before each request.
func (c *clients) waits() bool { return c.limiters != nil || c.aws != nil }

// admit asks client i's limiter for a request at now: ok, or how long to
// wait before asking again.
func (c *clients) admit(i int32, now time.Duration) (wait time.Duration, ok bool) {
	switch {
	case c.limiters != nil:
		w, err := c.limiters[i].Reserve(epoch.Add(now), -1)
		return w, err == nil
	case c.aws != nil:
		ok, w := c.bucket(i).acquire(now)
		return w, ok
	}
	return 0, true
}

func (c *clients) succeeded(i int32, now time.Duration) {
	if c.limiters != nil {
		c.limiters[i].Report(epoch.Add(now), nil)
	}
	if c.aws != nil {
		c.bucket(i).update(now, false)
		if c.awsQuota != nil {
			c.awsQuota[i].Refill()
		}
	}
	if c.quota != nil {
		c.quota.Refill()
	}
}

// failed reports client i's rejection at now, and whether it retries.
func (c *clients) failed(i int32, now time.Duration) bool {
	return c.failedWith(i, now, rejection{})
}

// failedWith reports client i's failure err at now, and whether it
// retries.
func (c *clients) failedWith(i int32, now time.Duration, err error) bool {
	if c.limiters != nil {
		c.limiters[i].Report(epoch.Add(now), err)
	}
	if c.aws != nil {
		c.bucket(i).update(now, true)
		if c.awsQuota != nil && !c.awsQuota[i].TryTake() {
			return false
		}
	}
	return c.quota == nil || c.quota.TryTake()
}

// fifo holds arrival times in order, oldest first.
type fifo struct {
	t    []time.Duration
	head int
}

func (f *fifo) len() int { return len(f.t) - f.head }

func (f *fifo) push(t time.Duration) {
	if f.head > 0 && f.head >= len(f.t)/2 {
		f.t = f.t[:copy(f.t, f.t[f.head:])]
		f.head = 0
	}
	f.t = append(f.t, t)
}

// dropUntil forgets the times at or before t.
func (f *fifo) dropUntil(t time.Duration) {
	for f.head < len(f.t) && f.t[f.head] <= t {
		f.head++
	}
}

// OutageExperiment runs each strategy through the same outage, Runs times.
type OutageExperiment struct {
	Config     OutageConfig // Strategy, Seed and Run are set per run
	Strategies []Strategy
	Runs       int
	Workers    int // 0 means GOMAXPROCS
}

// OutageRow is the mean of one strategy's runs.
type OutageRow struct {
	Strategy       Strategy
	Runs           int
	CallsPerClient float64
	GaveUp         float64       // clients whose request was given up
	PeakRPS        float64       // after the outage, in any 1 s window
	Completion     time.Duration // until every client succeeded
	LoadRPS        []float64     // mean requests/s received in each Config.Bucket
}

// Run returns one row per strategy, in order, or ctx's error if ctx ends
// first.
func (x OutageExperiment) Run(ctx context.Context) ([]OutageRow, error) {
	if x.Runs < 1 {
		return nil, errors.New("outage: runs must be at least 1")
	}
	if err := x.Config.validate(); err != nil {
		return nil, err
	}
	results := make([]OutageResult, len(x.Strategies)*x.Runs)
	errs := make([]error, len(results))
	err := parallel(ctx, len(results), x.Workers, func(i int) {
		c := x.Config
		c.Strategy, c.Run = x.Strategies[i/x.Runs], i%x.Runs
		results[i], errs[i] = RunOutage(c)
	})
	if err != nil {
		return nil, err
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	rows := make([]OutageRow, len(x.Strategies))
	perSecond := float64(time.Second) / float64(x.Config.Bucket)
	for s := range rows {
		row := OutageRow{Strategy: x.Strategies[s], Runs: x.Runs}
		var completion float64
		for _, r := range results[s*x.Runs : (s+1)*x.Runs] {
			row.CallsPerClient += float64(r.Calls) / float64(x.Config.Clients)
			row.GaveUp += float64(r.GaveUp)
			row.PeakRPS += float64(r.PeakRPS)
			completion += float64(r.Completion)
			for len(row.LoadRPS) < len(r.Load) {
				row.LoadRPS = append(row.LoadRPS, 0)
			}
			for b, n := range r.Load {
				row.LoadRPS[b] += float64(n) * perSecond
			}
		}
		runs := float64(x.Runs)
		row.CallsPerClient /= runs
		row.GaveUp /= runs
		row.PeakRPS /= runs
		row.Completion = time.Duration(completion / runs)
		for b := range row.LoadRPS {
			row.LoadRPS[b] /= runs
		}
		rows[s] = row
	}
	return rows, nil
}
