package kafkaretry

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry"
)

// admit reads the state of a retry record and applies the rules of "Bad
// headers" (package doc), logging every decision it had to make.
func (p *Processor) admit(r *kgo.Record, now time.Time) item {
	st, err := ReadState(r)
	it := item{rec: r, st: st, due: st.ProcessAfter, observe: !st.ProcessAfter.IsZero()}
	var rules []any
	if err != nil {
		rules = append(rules, slog.Any("error", err))
	}
	if last := max(p.cfg.Policy.Attempts()-1, 0); st.Attempt > last {
		it.st.Attempt = last
		rules = append(rules, slog.String("attempt_rule",
			HeaderRetryAttempt+" "+strconv.Itoa(st.Attempt)+" is not below MaxAttempts; counting "+strconv.Itoa(last)+": one last attempt"))
	}
	if limit := now.Add(p.cfg.MaxHold); it.due.After(limit) {
		it.due, it.observe = limit, false
		rules = append(rules, slog.String("hold_rule", HeaderProcessAfter+" is more than MaxHold ahead; holding for "+p.cfg.MaxHold.String()))
	}
	if rules != nil {
		due := any(it.due)
		if it.due.IsZero() {
			due = "now"
		}
		attrs := append([]any{"topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
			"attempt", it.st.Attempt, "due", due}, rules...)
		p.log.Warn("kafkaretry: bad retry headers; applying the documented rules", attrs...)
	}
	return it
}

// handle calls the Handler for it and, when it fails, forwards it to a retry
// topic or the DLQ and waits until Kafka has it. It returns an error only
// when ctx ended first: the record is then not done.
func (p *Processor) handle(ctx context.Context, cl *kgo.Client, it item) error {
	start := p.clock.Now()
	if it.observe {
		p.m.delayAccuracy.Observe(start.Sub(it.st.ProcessAfter).Seconds())
	}
	herr := p.cfg.Handler(ctx, it.rec)
	if herr == nil {
		if q := p.cfg.Policy.Quota; q != nil {
			q.Refill()
		}
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}

	st := it.st
	if st.Attempt == 0 && st.FirstAttempt.IsZero() {
		st.FirstAttempt = start
	}
	if st.OriginalTopic == "" {
		st.OriginalTopic, st.OriginalPartition, st.OriginalOffset = it.rec.Topic, it.rec.Partition, it.rec.Offset
	}
	now := p.clock.Now()
	n := st.Attempt + 1
	p.describe(&st, herr, n, it.rec.Topic, now)
	to, reason := p.judge(ctx, &st, herr, n, now, now.Sub(start))
	if reason != nil {
		to, st.DLQReason = p.dlq, reason.Error()
		st.ProcessAfter, st.PrevDelay = time.Time{}, 0
	}
	fwd := &kgo.Record{Topic: to, Key: it.rec.Key, Value: it.rec.Value, Headers: withState(it.rec, &st)}
	if err := p.forward(ctx, cl, fwd); err != nil {
		return err
	}
	attrs := []any{"from", it.rec.Topic, "partition", it.rec.Partition, "offset", it.rec.Offset,
		"to", to, "attempt", n, "error", herr}
	if reason != nil {
		p.m.deadLettered.WithLabelValues(st.DLQReason).Inc()
		p.log.Warn("kafkaretry: dead-lettered: "+st.DLQReason, attrs...)
	} else {
		p.m.retried.WithLabelValues(to).Inc()
		p.log.Debug("kafkaretry: retrying", append(attrs, "process_after", st.ProcessAfter)...)
	}
	return nil
}

// describe records attempt n's failure in st: the last error, the HTTP
// status and body it carries, and a line of history.
func (p *Processor) describe(st *State, herr error, n int, topic string, now time.Time) {
	st.Attempt = n
	st.LastErrorType = errorType(herr)
	st.LastErrorMessage = truncate(herr.Error(), MaxErrorBytes)
	st.APIStatusCode, st.APIResponse = 0, ""
	if code, ok := retry.StatusCode(herr); ok && code >= 100 && code <= 999 {
		st.APIStatusCode = code
	}
	if body, ok := responseBody(herr); ok {
		st.APIResponse = truncate(string(body), MaxErrorBytes)
	}
	st.History = append(st.History, Failure{
		Attempt: n, AtMs: now.UnixMilli(), Topic: topic, Type: st.LastErrorType,
		Message: truncate(st.LastErrorMessage, maxHistoryMessage), Status: st.APIStatusCode,
	})
	if len(st.History) > MaxHistory {
		st.History = append([]Failure(nil), st.History[len(st.History)-MaxHistory:]...)
	}
}

// judge decides where attempt n's failure goes, in the order of the core
// engine: classification, attempts, then the delay checked against budget
// and quota. For a retry it sets st's due time and previous delay and returns
// the retry topic; otherwise it returns the reason, one of the core's
// sentinel errors. call is how long the attempt took.
func (p *Processor) judge(ctx context.Context, st *State, herr error, n int, now time.Time, call time.Duration) (string, error) {
	pol := &p.cfg.Policy
	if pol.Classify(herr) != retry.Retry {
		return "", retry.ErrNotRetryable
	}
	if n >= pol.Attempts() {
		return "", retry.ErrAttemptsExhausted
	}
	delay := p.backoff.Delay(n, st.PrevDelay, pol.Rand)
	prev := delay
	if hint, ok := retry.RetryAfter(herr); ok && hint > delay {
		delay = hint
		if p.backoff.Max > 0 && delay > p.backoff.Max {
			delay = p.backoff.Max
		}
	}
	elapsed := now.Sub(st.FirstAttempt)
	if pol.Budget > 0 {
		if pol.CallTime > 0 {
			call = pol.CallTime
		}
		if elapsed+delay+call > pol.Budget {
			return "", retry.ErrBudgetExhausted
		}
	}
	if pol.Quota != nil && !pol.Quota.TryTake() {
		return "", retry.ErrQuotaExhausted
	}
	st.PrevDelay, st.ProcessAfter = prev, now.Add(delay)
	if pol.OnRetry != nil {
		pol.OnRetry(ctx, retry.Attempt{Name: pol.Name, Number: n, MaxAttempts: pol.Attempts(), Err: herr, Delay: delay, Elapsed: elapsed})
	}
	tier := 0
	if len(p.cfg.Tiers) > 0 {
		tier = min(n, len(p.cfg.Tiers))
	}
	return RetryTopic(p.cfg.Topic, tier), nil
}

// forward produces r and waits for the brokers' acknowledgement, trying again
// with ProducePolicy's backoff while Kafka refuses it. It returns an error
// only when ctx ended or ProducePolicy gave up.
func (p *Processor) forward(ctx context.Context, cl *kgo.Client, r *kgo.Record) error {
	return retry.Do(ctx, p.produce, func(ctx context.Context) error {
		attempt := *r // a fresh record: a failed produce leaves fields set in the old one
		err := cl.ProduceSync(ctx, &attempt).FirstErr()
		if err != nil && ctx.Err() == nil {
			p.log.Warn("kafkaretry: forward refused; nothing committed, trying again", "topic", r.Topic, "error", err)
		}
		return err
	})
}
