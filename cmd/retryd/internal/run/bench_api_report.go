package run

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// earlyTolerance is how early a second attempt may arrive before it counts
// as early: retryd keeps due times in epoch milliseconds, rounded up.
const earlyTolerance = time.Millisecond

// verdict is what a run's correctness checks found.
type verdict struct {
	acked      int   // tasks the API answered 201
	repeats    int   // answered 200, an idempotent repeat, though every key is new
	refused    int   // answered another status
	noAnswer   int   // no HTTP answer
	unsent     int   // never sent: the run was cut short
	delivered  int   // acknowledged tasks the target answered 200
	duplicates int   // tasks the target answered 200 more than once
	stray      int   // keys the target saw that the API had not acknowledged
	succeeded  int64 // SUCCEEDED in the API's count; -1 when unknown
	counts     map[string]int64
	lost       int      // acknowledged, and not answered 200 or not SUCCEEDED
	lostSample []string // some tasks not SUCCEEDED, as the API lists them
	retry      bool     // the run answers 500 first: its second attempts are checked
	early      int      // second attempts before their delay
	noSecond   int      // acknowledged tasks with no second attempt
	lags       []time.Duration
}

// check compares what the API acknowledged with what the target saw and
// what the API counts.
func (r *apiRun) check(ctx context.Context) verdict {
	v := verdict{succeeded: -1, retry: r.tg.fail.Load() == 2}
	acked := make(map[string]bool, r.n)
	undelivered := 0
	for i, code := range r.code {
		switch code {
		case 201:
			v.acked++
			acked[r.keys[i]] = true
		case 200:
			v.repeats++
		case 0:
			v.unsent++
		case codeNoAnswer:
			v.noAnswer++
		default:
			v.refused++
		}
		if code != 201 {
			continue
		}
		st := r.tg.state(r.keys[i])
		if st == nil || st.ok.Load() == 0 {
			undelivered++
		} else {
			v.delivered++
		}
		if v.retry {
			r.checkSecond(&v, st)
		}
	}
	r.tg.seen.Range(func(k, val any) bool {
		if val.(*keyState).ok.Load() > 1 {
			v.duplicates++
		}
		if !acked[k.(string)] {
			v.stray++
		}
		return true
	})
	// The run's own deadline may have passed: the counts are read anyway.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if counts, err := r.mon.taskCounts(cctx); err == nil {
		v.counts = counts
		v.succeeded = counts["SUCCEEDED"]
	} else {
		r.errs.add("final task counts: %v", err)
	}
	v.lost = undelivered
	if v.succeeded >= 0 && int64(v.acked) > v.succeeded {
		v.lost = max(v.lost, v.acked-int(v.succeeded))
	}
	if v.lost > 0 || v.succeeded < 0 {
		if s, err := r.mon.notSucceeded(cctx, 10); err == nil {
			v.lostSample = s
		}
	}
	return v
}

// checkSecond measures the lag of a task's second attempt behind its due
// time: the first answer sent plus the policy's 1 s delay.
func (r *apiRun) checkSecond(v *verdict, st *keyState) {
	if st == nil || st.recv2.Load() == 0 || st.sent1.Load() == 0 {
		v.noSecond++
		return
	}
	lag := time.Duration(st.recv2.Load()-st.sent1.Load()) - time.Second
	v.lags = append(v.lags, lag)
	if lag < -earlyTolerance {
		v.early++
	}
}

func (v verdict) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d acknowledged (201), %d answered 200 by the target, ", v.acked, v.delivered)
	if v.succeeded < 0 {
		b.WriteString("SUCCEEDED unknown, ")
	} else {
		fmt.Fprintf(&b, "%d SUCCEEDED in the API's count, ", v.succeeded)
	}
	fmt.Fprintf(&b, "%d duplicates (answered 200 more than once), %d lost", v.duplicates, v.lost)
	if v.retry {
		fmt.Fprintf(&b, ", %d early second attempts (over %v before due), %d without a second attempt", v.early, earlyTolerance, v.noSecond)
	}
	for _, p := range []struct {
		n    int
		what string
	}{
		{v.repeats, "answered 200 (a repeat) for a new key"},
		{v.refused, "refused"},
		{v.noAnswer, "without an answer"},
		{v.unsent, "never sent"},
		{v.stray, "seen by the target but not acknowledged"},
	} {
		if p.n > 0 {
			fmt.Fprintf(&b, "; %d %s", p.n, p.what)
		}
	}
	if v.lost > 0 || v.succeeded < 0 {
		fmt.Fprintf(&b, "; the API counts %v", v.counts)
		for _, s := range v.lostSample {
			b.WriteString("\n    not SUCCEEDED: " + s)
		}
	}
	return b.String()
}

// err fails the run for a task lost or retried early, and for anything
// that makes its figures meaningless.
func (v verdict) err() error {
	var bad []string
	if v.lost > 0 {
		bad = append(bad, fmt.Sprintf("%d tasks lost", v.lost))
	}
	if v.early > 0 {
		bad = append(bad, fmt.Sprintf("%d second attempts early", v.early))
	}
	if n := v.repeats + v.refused + v.noAnswer + v.unsent; n > 0 {
		bad = append(bad, fmt.Sprintf("%d creates not acknowledged", n))
	}
	if v.stray > 0 {
		bad = append(bad, fmt.Sprintf("%d unacknowledged tasks ran", v.stray))
	}
	if v.succeeded < 0 {
		bad = append(bad, "the API's task counts could not be read")
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(bad, ", "))
}

// dist is a sorted sample of durations.
type dist []time.Duration

func newDist(ds []time.Duration) dist {
	d := slices.Clone(ds)
	slices.Sort(d)
	return d
}

func (d dist) q(p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(p*float64(len(d))))]
}

// summary is "p50 X, p99 Y, max Z".
func (d dist) summary() string {
	if len(d) == 0 {
		return "none"
	}
	return fmt.Sprintf("p50 %v, p99 %v, max %v", round(d.q(0.5)), round(d.q(0.99)), round(d[len(d)-1]))
}

// sentLats is the latency of the creates that were answered.
func (r *apiRun) sentLats() dist {
	var ds []time.Duration
	for _, l := range r.lat {
		if l > 0 {
			ds = append(ds, l)
		}
	}
	return newDist(ds)
}

// endToEnd is "N tasks/s end to end (…)", counting acknowledged tasks.
func (r *apiRun) endToEnd() string {
	total, creates := r.done.Sub(r.start), r.createsDone.Sub(r.start)
	n := float64(r.verdict.acked)
	return fmt.Sprintf("%.0f tasks/s end to end (%v from the first create until the target had answered 200 for every task and the API counted every one SUCCEEDED; the creates alone took %v, %.0f/s)",
		n/total.Seconds(), total.Round(time.Millisecond), creates.Round(time.Millisecond), n/creates.Seconds())
}

func reportSingle(out io.Writer, r *apiRun) {
	fmt.Fprintf(out, "api single: %d tasks, one per POST /retry-tasks: %s\n  create latency %s\n",
		r.n, r.endToEnd(), r.sentLats().summary())
}

func reportBatch(out io.Writer, r *apiRun) {
	fmt.Fprintf(out, "api batch: %d tasks, %d per POST /retry-tasks/batch: %s\n  batch request latency %s\n",
		r.n, r.c.batch, r.endToEnd(), r.sentLats().summary())
}

// firstAttempts is the time from each acknowledged task's create being
// sent to its first attempt reaching the target.
func (r *apiRun) firstAttempts() dist {
	var ds []time.Duration
	for i, code := range r.code {
		if code != 201 {
			continue
		}
		if st := r.tg.state(r.keys[i]); st != nil && st.recv1.Load() != 0 {
			ds = append(ds, time.Duration(st.recv1.Load()-r.sent[i]))
		}
	}
	return newDist(ds)
}

// paced describes a paced run's creates.
func (r *apiRun) paced(rate int) string {
	return fmt.Sprintf("%d tasks at %d/s for %v: create latency %s; sent behind schedule %s",
		r.n, rate, r.c.duration, r.sentLats().summary(), newDist(r.behind).summary())
}

func reportSteady(rate int) reporter {
	return func(out io.Writer, r *apiRun) {
		fmt.Fprintf(out, "api steady: %s\n  create sent → first attempt at the target %s; every task SUCCEEDED %v after the last create was answered\n",
			r.paced(rate), r.firstAttempts().summary(), round(r.done.Sub(r.createsDone)))
	}
}

func reportRetry(rate int) reporter {
	return func(out io.Writer, r *apiRun) {
		lags := newDist(r.verdict.lags)
		low := "none"
		if len(lags) > 0 {
			low = round(lags[0]).String()
		}
		fmt.Fprintf(out, "api retry: %s\n  each task answered 500, then 200, under FIXED 1s, no jitter: second-attempt lag (its arrival - (response 1 sent + 1s)) %s, min %s; %d early\n",
			r.paced(rate), lags.summary(), low, r.verdict.early)
	}
}
