package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// The tests of store.TaskHeaderResealer and store.DestinationWalker,
// which a key rotation walks the store with: each fails, rather than
// skips, a store that does not implement them.

func testReseal(t *testing.T, newStore NewStore) {
	t.Run("task headers", func(t *testing.T) {
		t.Parallel()
		testResealHeaders(t, newStore)
	})
	t.Run("change fails", func(t *testing.T) {
		t.Parallel()
		testResealFails(t, newStore)
	})
	t.Run("purged meanwhile", func(t *testing.T) {
		t.Parallel()
		testResealPurged(t, newStore)
	})
	t.Run("destinations", func(t *testing.T) {
		t.Parallel()
		testDestinationEach(t, newStore)
	})
}

// resealer returns a new store as a store.TaskHeaderResealer, failing t
// when it is not one.
func resealer(t *testing.T, newStore NewStore) (store.Store, store.TaskHeaderResealer) {
	t.Helper()
	s := setup(t, newStore)
	r, ok := s.(store.TaskHeaderResealer)
	if !ok {
		t.Fatalf("%T does not implement store.TaskHeaderResealer", s)
	}
	return s, r
}

// sealedTask returns a request for a task of tn whose Authorization holds
// a token of key "old", as the API seals it, beside a header in the clear.
func sealedTask(tn, key string) *store.Task {
	in := newTask(tn, key)
	in.Headers = map[string]string{"Content-Type": "application/json", "Authorization": store.SealedPrefix + "old:" + key}
	return in
}

// rekey is a change that moves every token of key from to key to,
// recording the tasks it is called with.
type rekey struct {
	from, to string
	mu       sync.Mutex
	seen     map[string]int    // task ID → calls
	tenants  map[string]string // task ID → tenant
}

func newRekey(from, to string) *rekey {
	return &rekey{from: from, to: to, seen: map[string]int{}, tenants: map[string]string{}}
}

func (r *rekey) change(tenant, id string, h map[string]string) (map[string]string, bool, error) {
	r.mu.Lock()
	r.seen[id]++
	r.tenants[id] = tenant
	r.mu.Unlock()
	changed := false
	for k, v := range h {
		if rest, ok := strings.CutPrefix(v, store.SealedPrefix+r.from+":"); ok {
			h[k], changed = store.SealedPrefix+r.to+":"+rest, true
		}
	}
	return h, changed, nil
}

func testResealHeaders(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s, r := resealer(t, newStore)

	// More sealed tasks than a batch, so that the walk reads several.
	var sealed []*store.Task
	for i := 0; i < store.ResealBatch+20; i += 100 {
		var in []*store.Task
		for j := i; j < min(i+100, store.ResealBatch+20); j++ {
			in = append(in, sealedTask(tenant, fmt.Sprintf("sealed-%d", j)))
		}
		res, err := s.TaskCreateBatch(ctx, in)
		if err != nil {
			t.Fatalf("TaskCreateBatch() = %v", err)
		}
		for k, cr := range res {
			if cr.Err != nil || !cr.Created {
				t.Fatalf("TaskCreateBatch() item %d = created %v, %v", k, cr.Created, cr.Err)
			}
			sealed = append(sealed, cr.Task)
		}
	}
	// Sealed tasks of another tenant, in every status.
	const other = "tenant-b"
	pending := create(t, s, sealedTask(other, "pending"))
	inFlight := claimOne(t, s, t0, create(t, s, sealedTask(other, "in-flight")).ID)
	done := create(t, s, sealedTask(other, "succeeded"))
	finish(t, s, claimOne(t, s, t0, done.ID), store.Succeeded, t0.Add(time.Second))
	dead := create(t, s, sealedTask(other, "exhausted"))
	finish(t, s, claimOne(t, s, t0, dead.ID), store.Exhausted, t0.Add(time.Second))
	gone := create(t, s, sealedTask(other, "cancelled"))
	if _, err := cancel(s, other, gone.ID, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, tk := range []*store.Task{pending, inFlight, done, dead, gone} {
		sealed = append(sealed, get(t, s, other, tk.ID))
	}
	// Tasks with nothing sealed: none, a credential in the clear, the
	// prefix elsewhere than at a value's start or in another case.
	plain := []*store.Task{create(t, s, newTask(tenant, "plain-1"))}
	for i, h := range []map[string]string{
		nil,
		{"Authorization": "Bearer in-the-clear"},
		{"X-Note": "see " + store.SealedPrefix + "old:x"},
		{"X-Note": strings.ToUpper(store.SealedPrefix) + "old:x"},
	} {
		in := newTask(tenant, fmt.Sprintf("plain-h%d", i))
		in.Headers = h
		plain = append(plain, create(t, s, in))
	}

	rk := newRekey("old", "new")
	n, err := r.TaskHeadersReseal(ctx, func(tn, id string, h map[string]string) (map[string]string, bool, error) {
		// The walk holds nothing the store's own calls wait for.
		if _, err := s.TaskGet(ctx, tn, id); err != nil {
			return nil, false, fmt.Errorf("TaskGet(%s) within the walk: %w", id, err)
		}
		return rk.change(tn, id, h)
	})
	if err != nil || n != len(sealed) {
		t.Fatalf("TaskHeadersReseal() = %d, %v; want %d", n, err, len(sealed))
	}
	for _, want := range sealed {
		if rk.seen[want.ID] != 1 || rk.tenants[want.ID] != want.Tenant {
			t.Errorf("task %s (%s) given %d times for tenant %q, want once for %q", want.ID, want.IdempotencyKey,
				rk.seen[want.ID], rk.tenants[want.ID], want.Tenant)
		}
		got := get(t, s, want.Tenant, want.ID)
		wantH := maps.Clone(want.Headers)
		wantH["Authorization"] = store.SealedPrefix + "new:" + want.IdempotencyKey
		if !maps.Equal(got.Headers, wantH) {
			t.Errorf("task %s headers = %v, want %v", want.IdempotencyKey, got.Headers, wantH)
		}
		// A reseal is no change of the task: the version a worker holds
		// still finishes it.
		if got.Version != want.Version || got.Status != want.Status || got.AttemptNumber != want.AttemptNumber ||
			!sameTime(got.UpdatedAt, want.UpdatedAt) {
			t.Errorf("task %s after the reseal: version %d %s attempt %d updated %v, want version %d %s attempt %d updated %v",
				want.IdempotencyKey, got.Version, got.Status, got.AttemptNumber, got.UpdatedAt,
				want.Version, want.Status, want.AttemptNumber, want.UpdatedAt)
		}
	}
	for _, p := range plain {
		if rk.seen[p.ID] != 0 {
			t.Errorf("task %s, with nothing sealed (%v), was given to change", p.IdempotencyKey, p.Headers)
		}
		if got := get(t, s, tenant, p.ID); !maps.Equal(got.Headers, p.Headers) {
			t.Errorf("task %s headers = %v, want %v as they were", p.IdempotencyKey, got.Headers, p.Headers)
		}
	}
	finish(t, s, inFlight, store.Succeeded, t0.Add(2*time.Second))

	// Once every token is the new key's, a walk writes nothing.
	again := newRekey("old", "new")
	if n, err := r.TaskHeadersReseal(ctx, again.change); err != nil || n != 0 {
		t.Errorf("second TaskHeadersReseal() = %d, %v; want 0", n, err)
	}
	if len(again.seen) != len(sealed) {
		t.Errorf("second walk was given %d tasks, want the %d sealed", len(again.seen), len(sealed))
	}
}

var errReseal = errors.New("the reseal's change failed")

// An error of change ends the walk with it; what change changed before
// is written.
func testResealFails(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s, r := resealer(t, newStore)
	var all []*store.Task
	for i := range 5 {
		all = append(all, create(t, s, sealedTask(tenant, fmt.Sprintf("k%d", i))))
	}
	rk := newRekey("old", "new")
	calls := 0
	n, err := r.TaskHeadersReseal(ctx, func(tn, id string, h map[string]string) (map[string]string, bool, error) {
		if calls++; calls == 3 {
			return nil, false, errReseal
		}
		return rk.change(tn, id, h)
	})
	if !errors.Is(err, errReseal) || n != 2 || calls != 3 {
		t.Fatalf("TaskHeadersReseal() = %d, %v after %d calls; want 2 and the change's error after 3", n, err, calls)
	}
	moved := 0
	for _, tk := range all {
		got := get(t, s, tenant, tk.ID)
		switch v := got.Headers["Authorization"]; {
		case rk.seen[tk.ID] == 1 && v == store.SealedPrefix+"new:"+tk.IdempotencyKey:
			moved++
		case rk.seen[tk.ID] == 0 && v == tk.Headers["Authorization"]:
		default:
			t.Errorf("task %s: Authorization %q after %d calls of change", tk.IdempotencyKey, v, rk.seen[tk.ID])
		}
	}
	if moved != 2 {
		t.Errorf("%d tasks resealed, want the 2 changed before the error", moved)
	}
}

// A task deleted between the read of its headers and their write is not
// written, nor made anew.
func testResealPurged(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s, r := resealer(t, newStore)
	p := purger(t, s)
	var all []*store.Task
	for i := range 3 {
		tk := create(t, s, sealedTask(tenant, fmt.Sprintf("k%d", i)))
		finish(t, s, claimOne(t, s, t0, tk.ID), store.Succeeded, t0.Add(time.Second))
		all = append(all, tk)
	}
	rk := newRekey("old", "new")
	n, err := r.TaskHeadersReseal(ctx, func(tn, id string, h map[string]string) (map[string]string, bool, error) {
		if len(rk.seen) == 0 {
			if _, _, err := p.TaskPurge(ctx, t0.Add(time.Hour), 0); err != nil {
				return nil, false, err
			}
		}
		return rk.change(tn, id, h)
	})
	if err != nil || n > 0 {
		t.Fatalf("TaskHeadersReseal() = %d, %v; want 0 written: the tasks were purged", n, err)
	}
	for _, tk := range all {
		if _, err := s.TaskGet(ctx, tenant, tk.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("TaskGet(%s) after the purge and the reseal = %v, want ErrNotFound", tk.IdempotencyKey, err)
		}
	}
	if n, err := r.TaskHeadersReseal(ctx, rk.change); err != nil || n != 0 {
		t.Errorf("TaskHeadersReseal() of a store without tasks = %d, %v; want 0", n, err)
	}
}

func testDestinationEach(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	s, ds := destStore(t, newStore)
	w, ok := s.(store.DestinationWalker)
	if !ok {
		t.Fatalf("%T does not implement store.DestinationWalker", s)
	}
	type key struct{ tenant, id string }
	want := map[key]bool{}
	add := func(tn, id string) {
		createDest(t, ds, newDest(tn, id, "h-"+id))
		want[key{tn, id}] = true
	}
	// More of one tenant's than a batch, and tenants whose names hold
	// what a store's keys are made of.
	for i := range store.ResealBatch + 3 {
		add(tenant, fmt.Sprintf("d%03d", i))
	}
	for _, tn := range []string{"tenant-b", "odd}:dstids:tenant", "odd:1", "t*"} {
		add(tn, "only")
	}
	createDest(t, ds, newDest("tenant-gone", "x", "h"))
	if err := ds.DestinationDelete(ctx, "tenant-gone", "x", 0); err != nil {
		t.Fatal(err)
	}

	seen := map[key]int{}
	err := w.DestinationEach(ctx, func(tn, id string) error {
		seen[key{tn, id}]++
		// The walk holds nothing the store's own writes wait for.
		d, err := ds.DestinationGet(ctx, tn, id)
		if err != nil {
			return err
		}
		d.UpdatedAt = t0.Add(time.Minute)
		_, err = ds.DestinationUpdate(ctx, d)
		return err
	})
	if err != nil {
		t.Fatalf("DestinationEach() = %v", err)
	}
	for k := range want {
		if seen[k] != 1 {
			t.Errorf("destination %s/%s given %d times, want once", k.tenant, k.id, seen[k])
		}
	}
	for k, n := range seen {
		if !want[k] {
			t.Errorf("destination %s/%s given %d times, but there is none", k.tenant, k.id, n)
		}
	}
	if got := getDest(t, ds, "odd}:dstids:tenant", "only"); got.Version != 2 {
		t.Errorf("destination changed within the walk is at version %d, want 2", got.Version)
	}

	calls := 0
	err = w.DestinationEach(ctx, func(tn, id string) error {
		calls++
		return errReseal
	})
	if !errors.Is(err, errReseal) || calls != 1 {
		t.Errorf("DestinationEach() with a failing each = %v after %d calls, want its error after 1", err, calls)
	}

	empty := setup(t, newStore).(store.DestinationWalker)
	if err := empty.DestinationEach(ctx, func(tn, id string) error {
		return fmt.Errorf("an empty store gave %s/%s", tn, id)
	}); err != nil {
		t.Error(err)
	}
}
