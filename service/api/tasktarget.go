package api

import (
	"context"
	"errors"

	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/store"
)

// resolveDestination gives a task that names a destination its target:
// destination.Target of the destination's ID and the task's path (given as
// path, or as a targetUrl under the destination's url). seen caches the
// destinations a batch has read. A task naming none is left as it is.
func (s *server) resolveDestination(ctx context.Context, tenant string, q *taskRequest, seen map[string]*destination.Destination) error {
	if q.destinationID == "" {
		return nil
	}
	d := seen[q.destinationID]
	if d == nil {
		st, err := s.destinations()
		if err != nil {
			return err
		}
		sd, err := st.DestinationGet(ctx, tenant, q.destinationID)
		if errors.Is(err, store.ErrNotFound) {
			return invalid("destinationId", "no destination %q; create it with POST /destinations", q.destinationID)
		}
		if err != nil {
			return storeError(err, "destination")
		}
		if d, err = destination.Decode(sd.Spec); err != nil {
			return err
		}
		if seen != nil {
			seen[q.destinationID] = d
		}
	}
	path := q.path
	if q.targetURL != "" {
		var ok bool
		if path, ok = destination.PathUnder(d.URL, q.targetURL); !ok {
			return invalid("targetUrl", "must start with the url of destination %q, %s, and go on with a path", d.ID, d.URL)
		}
	} else if why := destination.CheckPath(d.URL, path); why != "" {
		return invalid("path", "%s", why)
	}
	q.targetURL = destination.Target(d.ID, path)
	return nil
}
