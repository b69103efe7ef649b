package api

import (
	"cmp"
	"net/http"
	"slices"

	"github.com/retrykit/retry/service/store"
)

// maxCauseScan is how many dead letters GET /dead-letters/causes reads at
// most, the newest first; past it the answer says truncated.
const maxCauseScan = 100000

// causeGroup is one item of GET /dead-letters/causes: the dead letters of
// one cause, when they finished (epoch ms), and the last response status
// and error of the newest of them, as an example.
type causeGroup struct {
	Cause       string `json:"cause"`
	Count       int    `json:"count"`
	FirstSeenAt int64  `json:"firstSeenAt"`
	LastSeenAt  int64  `json:"lastSeenAt"`
	LastStatus  int    `json:"lastStatus"`
	Example     string `json:"example"`
}

// causeList is the answer of GET /dead-letters/causes.
type causeList struct {
	Items     []*causeGroup `json:"items"`
	Scanned   int           `json:"scanned"`
	Truncated bool          `json:"truncated"`
}

// deadLetterCauses groups the tenant's dead letters (of one policy, with
// policyId) by causeOf, the largest group first, reading them all up to
// maxCauseScan.
func (s *server) deadLetterCauses(w http.ResponseWriter, r *http.Request, tenant string) error {
	q, err := parseQuery(r, "policyId")
	if err != nil {
		return err
	}
	f := store.TaskFilter{Tenant: tenant, Statuses: []store.Status{store.Exhausted, store.Failed}, PolicyID: q.policyID}
	groups := map[string]*causeGroup{}
	out := causeList{Items: []*causeGroup{}}
	token := ""
	for {
		page := store.Page{Token: token, Limit: min(store.MaxPageLimit, maxCauseScan-out.Scanned)}
		items, next, err := s.store.TaskList(r.Context(), f, page)
		if err != nil {
			return storeError(err, "list")
		}
		for _, t := range items {
			countCause(groups, t)
		}
		out.Scanned += len(items)
		if next == "" {
			break
		}
		if out.Scanned >= maxCauseScan {
			out.Truncated = true
			break
		}
		token = next
	}
	for _, g := range groups {
		out.Items = append(out.Items, g)
	}
	slices.SortFunc(out.Items, func(a, b *causeGroup) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Cause, b.Cause))
	})
	s.writeJSON(w, http.StatusOK, out)
	return nil
}

// countCause counts dead letter t in its cause's group. Tasks come newest first,
// so the first of a group is its example.
func countCause(groups map[string]*causeGroup, t *store.Task) {
	c := taskCause(t)
	g := groups[c]
	if g == nil {
		g = &causeGroup{Cause: c, LastStatus: t.LastStatus, Example: t.LastError}
		groups[c] = g
	}
	g.Count++
	if t.FinishedAt.IsZero() {
		return
	}
	ms := t.FinishedAt.UnixMilli()
	if g.FirstSeenAt == 0 || ms < g.FirstSeenAt {
		g.FirstSeenAt = ms
	}
	g.LastSeenAt = max(g.LastSeenAt, ms)
}
