package kafkaretry

import (
	"context"
	"log/slog"
	"slices"
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
// when ctx ended first: the record is then not done, and nothing hears of
// the attempt, which will be made again.
//
// The Handler, the observers and the forward get ctx with the record's trace
// context and the span of this handling (see startSpan).
func (p *Processor) handle(ctx context.Context, l *loop, it item) (forwarded bool, _ error) {
	start := p.clock.Now()
	if it.observe {
		p.m.delayAccuracy.Observe(start.Sub(it.st.ProcessAfter).Seconds())
	}
	ctx, span := p.startSpan(ctx, it)
	herr, class := p.call(ctx, it.rec)
	if herr != nil && ctx.Err() != nil {
		endSpanUnsettled(ctx, span, ctx.Err())
		return false, ctx.Err()
	}
	fwd, e := p.settle(it, herr, class, start)
	if fwd != nil {
		if err := l.forward(ctx, fwd); err != nil {
			endSpanUnsettled(ctx, span, err)
			return false, err
		}
	}
	p.observe(ctx, it.rec, fwd, e)
	endSpan(span, fwd, e)
	return fwd != nil, nil
}

// call runs the Handler on r, within Policy.AttemptTimeout when there is
// one. An attempt cut short by that timeout is the policy's doing, not the
// handler's judgement, so it is classed Retry, as retry.Do classes it;
// otherwise class is Unknown and the Policy classifies the error.
func (p *Processor) call(ctx context.Context, r *kgo.Record) (herr error, class retry.Decision) {
	d := p.policy.AttemptTimeout
	if d <= 0 {
		return p.cfg.Handler(ctx, r), retry.Unknown
	}
	actx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	herr = p.cfg.Handler(actx, r)
	if herr != nil && actx.Err() != nil && ctx.Err() == nil && !retry.IsPermanent(herr) {
		class = retry.Retry
	}
	return herr, class
}

// settle works out what follows attempt it.st.Attempt+1, begun at start,
// which returned herr (classed class, see call): nothing after a success,
// else the copy of the record to forward, to a retry topic or the DLQ, with
// its new state. e is the attempt's event, to be heard once the copy is
// safe in Kafka: a forward that fails is no retry.
func (p *Processor) settle(it item, herr error, class retry.Decision, start time.Time) (fwd *kgo.Record, e retry.Event) {
	st := it.st
	// The event is heard only once the forward is acknowledged: Start lets
	// an observer (retryotel's spans) place the attempt when it ran.
	e.Attempt, e.Start = st.Attempt+1, start
	first := st.FirstAttempt
	if st.Attempt == 0 && first.IsZero() {
		first = start
	}
	if herr == nil {
		if q := p.policy.Quota; q != nil {
			q.Refill()
		}
		e.Outcome = retry.Succeeded
		if p.hearsSuccess() {
			now := p.clock.Now()
			e.Duration, e.Elapsed = now.Sub(start), now.Sub(first)
		}
		return nil, e
	}
	st.FirstAttempt = first
	if st.OriginalTopic == "" {
		st.OriginalTopic, st.OriginalPartition, st.OriginalOffset = it.rec.Topic, it.rec.Partition, it.rec.Offset
	}
	now := p.clock.Now()
	p.describe(&st, herr, e.Attempt, it.rec.Topic, now)
	to, v := p.judge(&st, herr, class, e.Attempt, now, now.Sub(start))
	e.Err, e.Duration, e.Elapsed = herr, now.Sub(start), now.Sub(first)
	if v.Stop != nil {
		e.Outcome, e.Reason = retry.GaveUp, v.Stop
	} else {
		e.Outcome, e.Delay = retry.Retrying, v.Delay
	}
	return &kgo.Record{Topic: to, Key: it.rec.Key, Value: it.rec.Value, Headers: withState(it.rec, &st, p.spring)}, e
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

// judge asks the decision step (retry.Policy.Decide, the same as retry.Do's)
// where attempt n's failure goes; it has no rules of its own. For a retry
// it sets st's due time and previous delay and returns the retry topic of
// attempt n's tier; otherwise it clears them, sets st's DLQ reason and
// returns the DLQ. call is how long the attempt took.
func (p *Processor) judge(st *State, herr error, class retry.Decision, n int, now time.Time, call time.Duration) (string, retry.Verdict) {
	v := p.policy.Decide(&retry.Failure{Err: herr, Class: class, Attempt: n, PrevDelay: st.PrevDelay,
		Start: st.FirstAttempt, Now: now, Call: call})
	if v.Stop != nil {
		st.DLQReason = v.Stop.Error()
		st.ProcessAfter, st.PrevDelay = time.Time{}, 0
		return p.deadLetterTopic(herr), v
	}
	// x-process-after is in whole milliseconds: rounded up, the record is
	// never handled before its delay is over.
	st.PrevDelay, st.ProcessAfter = v.PrevDelay, ceilMillis(now.Add(v.Delay))
	return tierTopic(p.retryTopics, n), v
}

// ceilMillis rounds t up to a whole millisecond.
func ceilMillis(t time.Time) time.Time {
	if r := t.Truncate(time.Millisecond); r.Before(t) {
		return r.Add(time.Millisecond)
	}
	return t
}

// forward produces r and waits for the brokers' acknowledgement, trying again
// with ProducePolicy's backoff while Kafka refuses it. It returns an error
// only when ctx ended or ProducePolicy gave up. ctx carries the handling's
// span, so a producer hook that traces (kotel) makes its span a child of it.
func (p *Processor) forward(ctx context.Context, cl *kgo.Client, r *kgo.Record) error {
	return retry.Do(ctx, p.produce, func(ctx context.Context) error {
		attempt := *r // a fresh record: a failed produce leaves fields set in the old one
		// and fresh headers: a producer hook may rewrite them (kotel injects
		// its publish span), and each try starts from the record's own.
		attempt.Headers = slices.Clone(r.Headers)
		err := cl.ProduceSync(ctx, &attempt).FirstErr()
		if err != nil && ctx.Err() == nil {
			p.log.Warn("kafkaretry: forward refused; nothing committed, trying again", "topic", r.Topic, "error", err)
		}
		return err
	})
}

// deadLetterTopic is where a record whose last attempt failed with err goes:
// Config.DeadLetterTopic's choice, else the default dead-letter topic.
func (p *Processor) deadLetterTopic(err error) string {
	if f := p.cfg.DeadLetterTopic; f != nil {
		if t := f(err); t != "" {
			return t
		}
	}
	return p.dlq
}
