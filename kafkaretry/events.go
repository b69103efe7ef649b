package kafkaretry

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/retrykit/retry"
)

// observe hands e, the end of an attempt at r, to everything that hears
// attempts: the metrics, Policy.Observer and one log. One path for all of
// them means a dashboard, a user's observer and the logs count the same
// records. fwd is the copy forwarded to a retry topic or the DLQ, nil after
// a success.
func (p *Processor) observe(ctx context.Context, r *kgo.Record, fwd *kgo.Record, e retry.Event) {
	pol := &p.policy
	e.Name, e.MaxAttempts = pol.Name, pol.Attempts()
	p.m.Observe(ctx, e)
	if pol.Observer != nil {
		pol.Observer.Observe(ctx, e)
	}
	if pol.Logger == nil {
		p.logForward(r, fwd, e)
		return
	}
	if e.Outcome == retry.Succeeded && !pol.Logger.Enabled(ctx, slog.LevelDebug) {
		return // retry.Log would drop it; spare the logger With's copy
	}
	l := pol.Logger.With("topic", r.Topic, "partition", r.Partition, "offset", r.Offset)
	if fwd != nil {
		l = l.With("to", fwd.Topic)
	}
	retry.Log(l).Observe(ctx, e)
}

// hearsSuccess reports whether anything is told of a success; when nothing
// is, a success costs no event and no read of the clock.
func (p *Processor) hearsSuccess() bool {
	return p.policy.Observer != nil || p.policy.Logger != nil
}

// logForward is the Processor's own line for a forwarded record, for users
// who did not give the Policy a Logger: dead letters at Warn, retries at
// Debug.
func (p *Processor) logForward(r *kgo.Record, fwd *kgo.Record, e retry.Event) {
	if fwd == nil {
		return
	}
	attrs := []any{"from", r.Topic, "partition", r.Partition, "offset", r.Offset,
		"to", fwd.Topic, "attempt", e.Attempt, "error", e.Err}
	if e.Outcome == retry.GaveUp {
		p.log.Warn("kafkaretry: dead-lettered: "+e.Reason.Error(), attrs...)
		return
	}
	p.log.Debug("kafkaretry: retrying", append(attrs, "delay", e.Delay)...)
}
