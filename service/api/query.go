package api

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/store"
)

// MaxPageSize is the largest limit a list accepts.
const MaxPageSize = 1000

// query is a list's checked query string.
type query struct {
	page       store.Page
	statuses   []store.Status
	policyID   string
	targetHost string
	key        string // idempotencyKey
	cause      string
	// destinationID is the destination whose tasks are listed; targetHost
	// is then its host.
	destinationID string
}

// filter is the store's filter of q's parameters for the tenant; the cause
// is the API's to apply (causeWalk).
func (q query) filter(tenant string) store.TaskFilter {
	return store.TaskFilter{Tenant: tenant, Statuses: q.statuses, PolicyID: q.policyID,
		TargetHost: q.targetHost, IdempotencyKey: q.key}
}

// parseQuery reads a list's query string. Parameters not in allowed, repeated
// ones (but status) and bad values are 400s naming the parameter: a typo
// should not silently list everything. A query string that does not parse
// (a bad %-escape, a ';') is a 400 naming "query", where r.URL.Query would
// drop what it cannot read and go on.
func parseQuery(r *http.Request, allowed ...string) (query, error) {
	var q query
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return q, invalid("query", "the query string is malformed: %v", err)
	}
	for name, vs := range values {
		if !slices.Contains(allowed, name) {
			return q, invalid(name, "unknown query parameter")
		}
		if len(vs) > 1 && name != "status" {
			return q, invalid(name, "given more than once")
		}
	}
	q.page.Token = values.Get("pageToken")
	if s := values.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageSize {
			return q, invalid("limit", "must be a whole number from 1 to %d", MaxPageSize)
		}
		q.page.Limit = n
	}
	for _, v := range values["status"] {
		for s := range strings.SplitSeq(v, ",") {
			switch st := store.Status(strings.ToUpper(strings.TrimSpace(s))); st {
			case store.Pending, store.InFlight, store.Succeeded, store.Exhausted, store.Failed, store.Cancelled:
				if !slices.Contains(q.statuses, st) {
					q.statuses = append(q.statuses, st)
				}
			default:
				return q, invalid("status", "%q is not a task status (PENDING, IN_FLIGHT, SUCCEEDED, EXHAUSTED, FAILED, CANCELLED)", s)
			}
		}
	}
	for _, f := range [...]struct {
		name  string
		check func(string) string // why the value is not one, or ""
		to    *string
	}{
		{"policyId", checkPolicyID, &q.policyID},
		{"targetHost", checkTargetHost, &q.targetHost},
		{"idempotencyKey", checkKey, &q.key},
		{"cause", checkCause, &q.cause},
		{"destinationId", checkDestinationID, &q.destinationID},
	} {
		if v := values.Get(f.name); v != "" {
			if why := f.check(v); why != "" {
				return q, invalid(f.name, "%s", why)
			}
			*f.to = v
		}
	}
	if q.destinationID != "" {
		// A destination's tasks have its ID for a host (destination.Target).
		if q.targetHost != "" {
			return q, invalid("destinationId", "give destinationId or targetHost, not both")
		}
		q.targetHost = destination.HostOf(q.destinationID)
	}
	return q, nil
}

// listError maps a list's store failure: a page token the store did not
// issue is the client's mistake.
func listError(err error, q query) error {
	if errors.Is(err, store.ErrInvalid) && q.page.Token != "" {
		return invalid("pageToken", "is not a page token this list gave out")
	}
	return storeError(err, "list")
}
