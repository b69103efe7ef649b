package scheduler

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// Every ID comes back from the heap as it went in: NewID's, which the heap
// packs into 16 bytes, and any other a caller may have given its tasks,
// which it keeps as strings.
func TestHeapIDsComeBackUnchanged(t *testing.T) {
	t.Parallel()
	u := store.NewID()
	ids := []string{
		u,
		strings.ToUpper(u), // a UUID, but it would not come back the same from 16 bytes
		"00000000-0000-0000-0000-000000000000",
		"ffffffff-ffff-ffff-ffff-ffffffffffff",
		"a", "", "task-1",
		u[:35] + "g",                    // not hex
		strings.ReplaceAll(u, "-", "_"), // dashes elsewhere
		u + "0",
	}
	t0 := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	h := newDueHeap()
	for i, id := range ids {
		h.set(store.Due{ID: id, At: t0.Add(time.Duration(len(ids)-i) * time.Nanosecond), Version: 1})
	}
	checkHeap(t, h)
	got := h.popDue(t0.Add(time.Hour), len(ids), nil)
	if len(got) != len(ids) || h.Len() != 0 {
		t.Fatalf("popped %d of %d, %d left", len(got), len(ids), h.Len())
	}
	for i, d := range got {
		if want := ids[len(ids)-1-i]; d.id != want {
			t.Errorf("popped %d: %q, want %q", i, d.id, want)
		}
	}
	if h.byID.n != 0 || len(h.byName) != 0 || len(h.names) != 0 {
		t.Errorf("emptied heap still maps %d UUIDs, %d names (%d back)", h.byID.n, len(h.byName), len(h.names))
	}
}

func TestHeapParseID(t *testing.T) {
	t.Parallel()
	for range 1000 {
		id := store.NewID()
		u, ok := parseID(id)
		if !ok || store.FormatID(u) != id {
			t.Fatalf("parseID(%q) = %x, %v; formatted back %q", id, u, ok, store.FormatID(u))
		}
	}
	for _, id := range []string{"", "a", strings.ToUpper(store.NewID()), "0123456789abcdef0123456789abcdef0123"} {
		if _, ok := parseID(id); ok {
			t.Errorf("parseID(%q) ok, want not", id)
		}
	}
}

// The heap keeps due times to the nanosecond (it must never file one
// earlier than it was told), and times int64 nanoseconds cannot hold in
// their order.
func TestHeapDueTimesExact(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2031, 1, 2, 3, 4, 5, 999_999_999, time.UTC)
	h := newDueHeap()
	h.set(store.Due{ID: store.NewID(), At: t0, Version: 1})
	if got, _ := h.next(); !got.Equal(t0) {
		t.Errorf("filed at %v, want %v", got, t0)
	}
	if got := h.popDue(t0.Add(-time.Nanosecond), 10, nil); len(got) != 0 {
		t.Errorf("popped a nanosecond early: %v", got)
	}
	h.set(store.Due{ID: "never", At: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), Version: 1})
	h.set(store.Due{ID: "zero", Version: 1})
	got := h.popDue(t0, 10, nil)
	if len(got) != 2 || got[0].id != "zero" {
		t.Errorf("popped %+v at %v, want the zero time's then %v's", got, t0, t0)
	}
	if h.Len() != 1 {
		t.Errorf("%d left, want the year 9999's", h.Len())
	}
}

// Freed slots are used again, a kept request leaves with its entry (the
// next task in the slot does not inherit it), and once most slots are free
// the heap compacts them.
func TestHeapSlotReuseAndCompaction(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	h := newDueHeap()
	req := &store.Task{TargetURL: "http://example.com/", Method: "POST"}
	a, b := store.NewID(), "b"
	h.set(store.Due{ID: a, At: t0, Version: 1})
	h.set(store.Due{ID: b, At: t0.Add(time.Second), Version: 1})
	h.keep(a, req)
	h.keep(b, req)
	if got := h.popDue(t0, 1, nil); len(got) != 1 || got[0].id != a || got[0].req != req {
		t.Fatalf("popped %+v, want %s with its request", got, a)
	}
	h.remove(b, 1)
	if h.kept != 0 || len(h.reqs) != 0 {
		t.Errorf("empty heap keeps %d bytes of %d requests", h.kept, len(h.reqs))
	}
	c, d := store.NewID(), "d"
	h.set(store.Due{ID: c, At: t0, Version: 1})
	h.set(store.Due{ID: d, At: t0, Version: 1})
	if h.slots.len() != 2 {
		t.Errorf("%d slots for 2 entries after 2 were freed, want 2", h.slots.len())
	}
	for _, p := range h.popDue(t0, 2, nil) {
		if p.req != nil {
			t.Errorf("%s inherited a kept request", p.id)
		}
	}

	// Fill, then empty most of it: the slots shrink, the rest intact.
	rnd := rand.New(rand.NewPCG(1, 2))
	const n = 4 * minCompactSlots
	want := map[string]time.Time{}
	for i := range n {
		id := store.NewID()
		if i%7 == 0 {
			id = "x" + id // some that are not packed
		}
		at := t0.Add(time.Duration(rnd.Int64N(int64(time.Hour))))
		h.set(store.Due{ID: id, At: at, Version: 1})
		h.keep(id, req) // until the budget is spent
		want[id] = at
	}
	for id := range want {
		if len(want) <= n/8 {
			break
		}
		h.remove(id, 1)
		delete(want, id)
	}
	checkHeap(t, h)
	if h.slots.len() > n/4 {
		t.Errorf("%d slots for %d entries, want them compacted", h.slots.len(), h.Len())
	}
	got := h.popDue(t0.Add(time.Hour), n, nil)
	if len(got) != len(want) {
		t.Fatalf("popped %d, want %d", len(got), len(want))
	}
	last := t0
	for _, p := range got {
		at, ok := want[p.id]
		if !ok || at.Before(last) || p.version != 1 || p.req != nil && p.req != req {
			t.Fatalf("popped %+v (due %v, known %v) after one due %v", p, at, ok, last)
		}
		last = at
	}
	if h.kept != 0 || len(h.reqs) != 0 {
		t.Errorf("empty heap keeps %d bytes of %d requests", h.kept, len(h.reqs))
	}
}

// Random news, ends, claims and kept requests against a plain map: the
// heap always agrees with it.
func TestHeapAgreesWithAMap(t *testing.T) {
	t.Parallel()
	type news struct {
		at      time.Time
		version int64
		req     *store.Task
	}
	rnd := rand.New(rand.NewPCG(3, 4))
	t0 := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	ids := make([]string, 200)
	for i := range ids {
		ids[i] = store.NewID()
		if i%5 == 0 {
			ids[i] = ids[i][:8] // not packed
		}
	}
	h, model := newDueHeap(), map[string]news{}
	now := t0
	for step := range 100_000 {
		id := ids[rnd.IntN(len(ids))]
		switch op := rnd.IntN(10); {
		case op < 5:
			d := store.Due{ID: id, At: now.Add(time.Duration(rnd.Int64N(int64(time.Minute)))), Version: rnd.Int64N(8)}
			m, ok := model[id]
			if !ok || d.Version > m.version || d.Version == m.version && d.At.Before(m.at) {
				model[id] = news{d.At, d.Version, m.req}
			}
			h.set(d)
		case op < 6:
			v := rnd.Int64N(8)
			if m, ok := model[id]; ok && m.version <= v {
				delete(model, id)
			}
			h.remove(id, v)
		case op < 7:
			req := &store.Task{ID: id}
			if m, ok := model[id]; ok && m.req == nil {
				m.req = req
				model[id] = m
			}
			h.keep(id, req)
		default:
			now = now.Add(time.Duration(rnd.Int64N(int64(time.Second))))
			for _, p := range h.popDue(now, rnd.IntN(20), nil) {
				m, ok := model[p.id]
				if !ok || m.at.After(now) || m.version != p.version || m.req != p.req {
					t.Fatalf("step %d: popped %+v at %v, the model has %+v (%v)", step, p, now, m, ok)
				}
				delete(model, p.id)
			}
		}
		if h.Len() != len(model) {
			t.Fatalf("step %d: %d entries, the model %d", step, h.Len(), len(model))
		}
	}
	checkHeap(t, h)
	var earliest time.Time
	for _, m := range model {
		if earliest.IsZero() || m.at.Before(earliest) {
			earliest = m.at
		}
	}
	if got, ok := h.next(); ok != (len(model) > 0) || ok && !got.Equal(earliest) {
		t.Errorf("next %v %v, want %v", got, ok, earliest)
	}
}

// checkHeap fails t unless h's slots, order and maps agree with each other.
func checkHeap(t *testing.T, h *dueHeap) {
	t.Helper()
	for pos, i := range h.order {
		s := *h.slots.at(i)
		if int(s.pos) != pos {
			t.Fatalf("slot %d at %d thinks it is at %d", i, pos, s.pos)
		}
		if pos > 0 && s.due < h.slots.at(h.order[(pos-1)/2]).due {
			t.Fatalf("slot %d at %d is due before its parent", i, pos)
		}
		if id, ok := h.names[i]; ok {
			if h.byName[id] != i {
				t.Fatalf("name %q maps to %d, not %d", id, h.byName[id], i)
			}
		} else if j, ok := h.byID.get(&h.slots, s.id); !ok || j != i {
			t.Fatalf("UUID %x maps to %d, not %d", s.id, j, i)
		}
	}
	if live := h.byID.n + len(h.byName); live != len(h.order) {
		t.Fatalf("maps hold %d IDs for %d entries", live, len(h.order))
	}
	if len(h.order)+len(h.free) != h.slots.len() {
		t.Fatalf("%d entries and %d free slots, of %d", len(h.order), len(h.free), h.slots.len())
	}
	var kept int64
	for _, r := range h.reqs {
		kept += requestBytes(r)
	}
	if kept != h.kept {
		t.Fatalf("kept %d bytes, counted %d", kept, h.kept)
	}
}

// The ID index finds every ID it holds and none it does not, through
// growth and deletions that shift cells back across the table's end.
func TestHeapIDIndex(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(5, 6))
	var slots slab
	for range 5000 {
		u, _ := parseID(store.NewID())
		slots.at(slots.add()).id = u
	}
	x, in := newIDIndex(0), map[int32]bool{}
	for step := range 200_000 {
		i := int32(rnd.IntN(slots.len()))
		if in[i] {
			x.del(&slots, i)
			delete(in, i)
		} else if len(in) < 1000 || rnd.IntN(2) == 0 {
			x.put(&slots, i)
			in[i] = true
		}
		if step%1000 == 0 || step > 199_000 {
			for j := range slots.len() {
				got, ok := x.get(&slots, slots.at(int32(j)).id)
				if ok != in[int32(j)] || ok && got != int32(j) {
					t.Fatalf("step %d: get(slot %d) = %d, %v; holds it: %v", step, j, got, ok, in[int32(j)])
				}
			}
		}
	}
	if x.n != len(in) {
		t.Errorf("counts %d, holds %d", x.n, len(in))
	}
}
