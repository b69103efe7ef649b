package redis

import (
	"context"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
	"github.com/retrykit/retry/service/store/internal/pagetoken"
	"github.com/retrykit/retry/service/store/internal/prep"
)

// Destinations live per tenant, beside its policies under the tenant's
// hash tag: a hash per destination and a sorted set of IDs, all scored 0
// so that it pages by ID. The scripts (lua/dest*.lua) check the version a
// change names and write both keys at once; reads need no script.

// destFields are the fields of a destination's hash, in the order
// decodeDestination reads them and the scripts reply with them.
var destFields = []string{"spec", "hash", "version", "created", "updated"}

// DestinationCreate stores a new destination; see store.Destinations.
func (s *Store) DestinationCreate(ctx context.Context, in *store.Destination) (*store.Destination, bool, error) {
	if err := s.open("create destination"); err != nil {
		return nil, false, err
	}
	d, err := prep.Destination(in)
	if err != nil {
		return nil, false, fmt.Errorf("redis: create destination: %w", err)
	}
	c := &call{sc: s.sc.destCreate, keys: []string{s.k.destination(d.Tenant, d.ID), s.k.destinationIDs(d.Tenant)},
		args: []any{d.ID, d.Spec, d.RequestHash, epochms.Of(d.CreatedAt)}}
	outcome, record, err := s.destScript(ctx, c)
	if err != nil {
		return nil, false, s.fail("create destination", err)
	}
	switch outcome {
	case "created":
		return d, true, nil
	case "exists":
	default:
		return nil, false, s.fail("create destination", errCorrupt)
	}
	stored, err := decodeDestination(d.Tenant, d.ID, record)
	if err != nil {
		return nil, false, s.fail("create destination", err)
	}
	if stored.RequestHash != d.RequestHash {
		return nil, false, fmt.Errorf("redis: destination %s was created by another request: %w", d.ID, store.ErrConflict)
	}
	return stored, false, nil
}

// DestinationUpdate changes a destination at the version given; see
// store.Destinations.
func (s *Store) DestinationUpdate(ctx context.Context, in *store.Destination) (*store.Destination, error) {
	if err := s.open("update destination"); err != nil {
		return nil, err
	}
	d, err := prep.DestinationChange(in)
	if err != nil {
		return nil, fmt.Errorf("redis: update destination: %w", err)
	}
	c := &call{sc: s.sc.destUpdate, keys: []string{s.k.destination(d.Tenant, d.ID)},
		args: []any{itoa(d.Version), d.Spec, d.RequestHash, epochms.Of(d.UpdatedAt)}}
	outcome, record, err := s.destScript(ctx, c)
	if err == nil {
		err = destRefused(outcome, d.ID, d.Version, record)
	}
	if err != nil {
		return nil, s.fail("update destination", err)
	}
	out, err := decodeDestination(d.Tenant, d.ID, record)
	return out, s.fail("update destination", err)
}

// DestinationGet returns one destination of tenant.
func (s *Store) DestinationGet(ctx context.Context, tenant, id string) (*store.Destination, error) {
	if err := s.open("get destination"); err != nil {
		return nil, err
	}
	if err := prep.DestinationKey(tenant, id); err != nil {
		return nil, fmt.Errorf("redis: get destination: %w", err)
	}
	record, err := s.rdb.HMGet(ctx, s.k.destination(tenant, id), destFields...).Result()
	if err != nil {
		return nil, s.fail("get destination", err)
	}
	if record[0] == nil {
		return nil, fmt.Errorf("redis: destination %s: %w", id, store.ErrNotFound)
	}
	d, err := decodeDestination(tenant, id, record)
	return d, s.fail("get destination", err)
}

// DestinationList lists tenant's destinations by ID; the page token is the
// last ID.
func (s *Store) DestinationList(ctx context.Context, tenant string, page store.Page) ([]*store.Destination, string, error) {
	if err := s.open("list destinations"); err != nil {
		return nil, "", err
	}
	if tenant == "" {
		return nil, "", fmt.Errorf("redis: list destinations: empty tenant: %w", store.ErrInvalid)
	}
	from := "-"
	if page.Token != "" {
		after, err := pagetoken.Decode("destination", page.Token)
		if err != nil {
			return nil, "", fmt.Errorf("redis: list destinations: %w", err)
		}
		from = "(" + after
	}
	limit := store.PageLimit(page.Limit)
	ids, err := s.rdb.ZRangeByLex(ctx, s.k.destinationIDs(tenant), &goredis.ZRangeBy{Min: from, Max: "+", Count: int64(limit + 1)}).Result()
	if err != nil {
		return nil, "", s.fail("list destinations", err)
	}
	next := ""
	if len(ids) > limit {
		ids = ids[:limit]
		next = pagetoken.Encode("destination", ids[limit-1])
	}
	if len(ids) == 0 {
		return nil, "", nil
	}
	// One round trip for the records; the keys share the tenant's slot.
	pipe := s.rdb.Pipeline()
	cmds := make([]*goredis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HMGet(ctx, s.k.destination(tenant, id), destFields...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, "", s.fail("list destinations", err)
	}
	items := make([]*store.Destination, 0, len(ids))
	for i, cmd := range cmds {
		record := cmd.Val()
		if record[0] == nil {
			continue // deleted since the IDs were read
		}
		d, err := decodeDestination(tenant, ids[i], record)
		if err != nil {
			return nil, "", s.fail("list destinations", err)
		}
		items = append(items, d)
	}
	return items, next, nil
}

// DestinationDelete deletes a destination at the version given (0: any);
// see store.Destinations.
func (s *Store) DestinationDelete(ctx context.Context, tenant, id string, version int64) error {
	if err := s.open("delete destination"); err != nil {
		return err
	}
	if err := prep.DestinationKey(tenant, id); err != nil {
		return fmt.Errorf("redis: delete destination: %w", err)
	}
	c := &call{sc: s.sc.destDelete, keys: []string{s.k.destination(tenant, id), s.k.destinationIDs(tenant)},
		args: []any{id, itoa(version)}}
	outcome, record, err := s.destScript(ctx, c)
	if err == nil {
		err = destRefused(outcome, id, version, record)
	}
	return s.fail("delete destination", err)
}

// destScript runs c, one of the lua/dest*.lua scripts, and splits its
// reply into the outcome and what follows it.
func (s *Store) destScript(ctx context.Context, c *call) (outcome string, rest []any, err error) {
	s.eval(ctx, c)
	reply, err := c.cmd.Slice()
	if err != nil {
		return "", nil, err
	}
	if len(reply) == 0 {
		return "", nil, errCorrupt
	}
	outcome, _ = reply[0].(string)
	return outcome, reply[1:], nil
}

// destRefused returns the error of a script's outcome other than "ok":
// ErrNotFound when there is no destination id, ErrConflict when it is at
// another version than the one named (rest holding its own).
func destRefused(outcome, id string, version int64, rest []any) error {
	switch outcome {
	case "ok":
		return nil
	case "missing":
		return fmt.Errorf("destination %s: %w", id, store.ErrNotFound)
	case "stale":
		if len(rest) == 1 {
			return fmt.Errorf("destination %s is at version %v, not %d: %w", id, rest[0], version, store.ErrConflict)
		}
	}
	return errCorrupt
}

// decodeDestination reads a destination of tenant from its hash's
// destFields.
func decodeDestination(tenant, id string, record []any) (*store.Destination, error) {
	if len(record) != len(destFields) {
		return nil, errCorrupt
	}
	f := make([]string, len(record))
	for i, v := range record {
		var ok bool
		if f[i], ok = v.(string); !ok {
			return nil, errCorrupt
		}
	}
	var n [3]int64
	for i, v := range f[2:] {
		var err error
		if n[i], err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, errCorrupt
		}
	}
	return &store.Destination{Tenant: tenant, ID: id, Spec: []byte(f[0]), RequestHash: f[1], Version: n[0],
		CreatedAt: epochms.Time(n[1]), UpdatedAt: epochms.Time(n[2])}, nil
}

var _ store.Destinations = (*Store)(nil)
