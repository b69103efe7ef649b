package sim

import (
	"context"
	"errors"
	"time"
)

// OCCConfig is one run of the contention experiment.
//
// One row carries a version number. Every client wants one successful write
// and loops: read the row, then write it conditionally on the version it
// read. The server applies a write only if the version is unchanged, and then
// increments it. Every message (read request, read response, write request,
// write response) takes a Latency draw. All clients start at time 0, there is
// no attempt limit, and after its n-th failed write (n = 1 for the first) a
// client waits Strategy.Backoff.Delay(n, previous delay) before its next
// read.
type OCCConfig struct {
	Clients  int
	Strategy Strategy
	Latency  Latency // zero means the defaults, |Normal(10 ms, 2 ms)|
	Seed     uint64  // with Run, picks the random streams
	Run      int
}

// OCCResult is what one run measured.
type OCCResult struct {
	Calls      int           // writes the server received
	Succeeded  int           // clients whose write went through
	GaveUp     int           // clients whose retry a quota refused
	Version    int64         // the row's version at the end; it starts at 0
	Completion time.Duration // virtual time of the last event
}

const (
	readArrives uint8 = iota
	writeArrives
	writeAnswered
	occReady // the backoff is over: the client asks its limiter, then reads
)

// conflict is a failed conditional write, as the clients' limiters see it:
// a 409. It is no overload signal by default (see retry.IsOverload); the
// occ clients' limiters take every failed write for one, since contention
// is the overload here.
type conflict struct{}

func (conflict) Error() string       { return "409 Conflict" }
func (conflict) HTTPStatusCode() int { return 409 }

func everyFailure(err error) bool { return err != nil }

// RunOCC runs the experiment once; with Clients ≤ 0 it returns the zero
// result. It always ends: a write fails only when another client's write
// succeeded since the read, and one client's read-write windows do not
// overlap, so each client fails at most Clients−1 times. It shares nothing
// between calls, so any number may run at once.
//
// With a quota, a limiter or the adaptive mode (see Strategy), each client
// reports each write's answer, and asks its limiter before each read; a
// retry the quota refuses ends the client unserved. An invalid quota or
// limiter gives the zero result.
func RunOCC(c OCCConfig) OCCResult {
	if c.Clients <= 0 {
		return OCCResult{}
	}
	lat := c.Latency.orDefault()
	net, jitter := streams(c.Seed, c.Clients, c.Run)
	cl, err := newClients(c.Strategy, c.Clients, jitter, everyFailure)
	if err != nil {
		return OCCResult{}
	}
	failures := make([]int, c.Clients)
	prev := make([]time.Duration, c.Clients)
	q := queue{ev: make([]event, 0, c.Clients)}
	for i := range c.Clients {
		l := lat.draw(net)
		if cl.waits() {
			cl.reqLat[i] = l
			q.push(event{at: 0, client: int32(i), kind: occReady})
		} else {
			q.push(event{at: l, client: int32(i), kind: readArrives})
		}
	}
	var res OCCResult
	for q.len() > 0 {
		e := q.peek()
		res.Completion = e.at
		switch e.kind {
		case readArrives:
			// The read response and the write request cross the network back
			// to back: the client does nothing in between.
			at := e.at + lat.draw(net) + lat.draw(net)
			q.replace(event{at: at, client: e.client, kind: writeArrives, value: res.Version})
		case writeArrives:
			res.Calls++
			ok := int64(0)
			if e.value == res.Version {
				res.Version++
				ok = 1
			}
			q.replace(event{at: e.at + lat.draw(net), client: e.client, kind: writeAnswered, value: ok})
		case writeAnswered:
			if e.value == 1 {
				res.Succeeded++
				cl.succeeded(e.client, e.at)
				q.pop()
				continue
			}
			i := e.client
			if !cl.failedWith(i, e.at, conflict{}) {
				res.GaveUp++
				q.pop()
				continue
			}
			failures[i]++
			prev[i] = c.Strategy.Backoff.Delay(failures[i], prev[i], jitter)
			if cl.waits() {
				cl.reqLat[i] = lat.draw(net)
				q.replace(event{at: e.at + prev[i], client: i, kind: occReady})
				continue
			}
			q.replace(event{at: e.at + prev[i] + lat.draw(net), client: i, kind: readArrives})
		case occReady:
			if wait, ok := cl.admit(e.client, e.at); !ok {
				q.replace(event{at: e.at + wait, client: e.client, kind: occReady})
			} else {
				q.replace(event{at: e.at + wait + cl.reqLat[e.client], client: e.client, kind: readArrives})
			}
		}
	}
	return res
}

// OCCExperiment runs every strategy at every client count, Runs times each.
type OCCExperiment struct {
	Strategies []Strategy
	Clients    []int
	Runs       int
	Seed       uint64
	Latency    Latency
	Workers    int // goroutines sharing the runs; 0 means GOMAXPROCS
}

// OCCRow is the mean of the runs of one strategy at one client count.
type OCCRow struct {
	Strategy   Strategy
	Clients    int
	Runs       int
	Calls      float64       // writes the server received
	GaveUp     float64       // clients whose retry a quota refused
	Completion time.Duration // time of the last event
}

// Run returns one row per strategy and client count, strategies outermost,
// or an error if Runs or a client count is below 1, or ctx's error if ctx
// ends first.
func (x OCCExperiment) Run(ctx context.Context) ([]OCCRow, error) {
	if x.Runs < 1 {
		return nil, errors.New("occ: runs must be at least 1")
	}
	for _, n := range x.Clients {
		if n < 1 {
			return nil, errors.New("occ: client counts must be at least 1")
		}
	}
	cells := len(x.Strategies) * len(x.Clients)
	results := make([]OCCResult, cells*x.Runs)
	err := parallel(ctx, len(results), x.Workers, func(i int) {
		cell, run := i/x.Runs, i%x.Runs
		results[i] = RunOCC(OCCConfig{
			Clients:  x.Clients[cell%len(x.Clients)],
			Strategy: x.Strategies[cell/len(x.Clients)],
			Latency:  x.Latency,
			Seed:     x.Seed,
			Run:      run,
		})
	})
	if err != nil {
		return nil, err
	}
	rows := make([]OCCRow, cells)
	for cell := range rows {
		var calls, gaveUp, completion float64
		for _, r := range results[cell*x.Runs : (cell+1)*x.Runs] {
			calls += float64(r.Calls)
			gaveUp += float64(r.GaveUp)
			completion += float64(r.Completion)
		}
		rows[cell] = OCCRow{
			Strategy:   x.Strategies[cell/len(x.Clients)],
			Clients:    x.Clients[cell%len(x.Clients)],
			Runs:       x.Runs,
			Calls:      calls / float64(x.Runs),
			GaveUp:     gaveUp / float64(x.Runs),
			Completion: time.Duration(completion / float64(x.Runs)),
		}
	}
	return rows, nil
}
