package gate

import (
	"context"
	"fmt"
	"time"

	"github.com/retrykit/retry/service/destination"
)

// track follows the failures of a destination with AutoDisable: it
// records when a run of failed attempts began, clears it on a success, and
// disables the destination once the run has lasted AfterMs. It writes only
// when the state changes, in the background, one write per destination at
// a time.
func (g *Gate) track(ctx context.Context, c *Call, ok bool) {
	d := c.v.d
	if d.AutoDisable == nil || d.Status != destination.Active {
		return
	}
	now := g.cfg.Now()
	after := time.Duration(d.AutoDisable.AfterMs) * time.Millisecond
	switch {
	case ok && d.FailingSince == 0:
		return
	case !ok && d.FailingSince != 0 && now.Sub(time.UnixMilli(d.FailingSince)) < after:
		return
	}
	if !c.e.writing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer c.e.writing.Store(false)
		ctx := context.WithoutCancel(ctx)
		_, _, err := destination.Update(ctx, g.cfg.Store, c.tenant, c.id, now, func(d *destination.Destination) (bool, error) {
			switch {
			case d.AutoDisable == nil || d.Status != destination.Active:
				return false, nil
			case ok:
				changed := d.FailingSince != 0
				d.FailingSince = 0
				return changed, nil
			case d.FailingSince == 0:
				d.FailingSince = now.UnixMilli()
				return true, nil
			case now.Sub(time.UnixMilli(d.FailingSince)) >= time.Duration(d.AutoDisable.AfterMs)*time.Millisecond:
				reason := fmt.Sprintf("every attempt failed for %s since %s",
					now.Sub(time.UnixMilli(d.FailingSince)).Round(time.Second), time.UnixMilli(d.FailingSince).UTC().Format(time.RFC3339))
				return d.SetStatus(destination.Disabled, reason, now), nil
			}
			return false, nil
		}, 0)
		if err != nil {
			g.cfg.Logger.Warn("gate: could not record the destination's failures", "destination", c.id, "error", err)
			return
		}
		g.Forget(c.tenant, c.id)
	}()
}
