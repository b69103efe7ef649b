package api

import (
	"context"

	"github.com/retrykit/retry/service/store"
)

// builtinPlace returns where on a page of the tenant's policies (items, by
// ID, and the token of the next page) the built-in "default" is listed, or
// -1 when not on this page: the tenant registered a "default" of its own,
// or the ID sorts onto another page. Pages are ranges of IDs in byte
// order; an ID in the gap between this page and the next belongs at the
// end of this one, which one read of the next page's first ID tells. A
// page that lists it holds one item over its limit.
func (s *server) builtinPlace(ctx context.Context, tenant string, first bool, items []*store.Policy, next string) (int, error) {
	const id = store.DefaultPolicyID
	at := len(items)
	for i, p := range items {
		if p.ID == id {
			return -1, nil
		}
		if p.ID > id {
			at = i
			break
		}
	}
	if at == 0 && !first {
		return -1, nil // it sorts before this page: an earlier one listed it
	}
	if at == len(items) && next != "" {
		after, _, err := s.store.PolicyList(ctx, tenant, store.Page{Token: next, Limit: 1})
		if err != nil {
			return -1, err
		}
		if len(after) > 0 && after[0].ID <= id {
			return -1, nil // a later page has it, or the tenant's own
		}
	}
	return at, nil
}
