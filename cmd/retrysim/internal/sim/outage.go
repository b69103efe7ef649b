package sim

import (
	"context"
	"errors"
	"time"
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
	Admitted   int           // requests it admitted: Clients, once the run is over
	PeakRPS    int           // most requests received in any 1 s window after the outage
	Completion time.Duration // when the last client received its success
	Load       []int         // requests received in each Bucket, from time 0
}

// RunOutage runs the experiment once, or returns an error if c has fewer
// than 1 client or request/s of capacity, a negative spread or outage, or a
// bin that is not positive. Any number may run at once.
func RunOutage(c OutageConfig) (OutageResult, error) {
	if err := c.validate(); err != nil {
		return OutageResult{}, err
	}
	lat := c.Latency.orDefault()
	net, jitter := streams(c.Seed, c.Clients, c.Run)
	failures := make([]int, c.Clients)
	prev := make([]time.Duration, c.Clients)
	q := queue{ev: make([]event, 0, c.Clients)}
	for i := range c.Clients {
		first := time.Duration(net.Int64N(int64(c.Spread) + 1))
		q.push(event{at: first + lat.draw(net), client: int32(i)})
	}
	var (
		res    OutageResult
		window = int64(-1) // the second after the outage being counted
		inWin  int         // admissions in it
		recent fifo        // arrivals after the outage, within the last second
	)
	for q.len() > 0 {
		e := q.peek()
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
			res.Completion = max(res.Completion, e.at+lat.draw(net))
			q.pop()
			continue
		}
		// The rejection, the wait and the next request follow one another
		// with nothing else for the client to decide: one event covers them.
		i := e.client
		failures[i]++
		prev[i] = c.Strategy.Backoff.Delay(failures[i], prev[i], jitter)
		q.replace(event{at: e.at + lat.draw(net) + prev[i] + lat.draw(net), client: i})
	}
	return res, nil
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
	err := parallel(ctx, len(results), x.Workers, func(i int) {
		c := x.Config
		c.Strategy, c.Run = x.Strategies[i/x.Runs], i%x.Runs
		results[i], _ = RunOutage(c) // c was validated above
	})
	if err != nil {
		return nil, err
	}
	rows := make([]OutageRow, len(x.Strategies))
	perSecond := float64(time.Second) / float64(x.Config.Bucket)
	for s := range rows {
		row := OutageRow{Strategy: x.Strategies[s], Runs: x.Runs}
		var completion float64
		for _, r := range results[s*x.Runs : (s+1)*x.Runs] {
			row.CallsPerClient += float64(r.Calls) / float64(x.Config.Clients)
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
		row.PeakRPS /= runs
		row.Completion = time.Duration(completion / runs)
		for b := range row.LoadRPS {
			row.LoadRPS[b] /= runs
		}
		rows[s] = row
	}
	return rows, nil
}
