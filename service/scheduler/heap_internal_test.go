package scheduler

import (
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
)

// permutations calls f with every order of n items.
func permutations(n int, f func(order []int)) {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	var walk func(k int)
	walk = func(k int) {
		if k == n {
			f(order)
			return
		}
		for i := k; i < n; i++ {
			order[k], order[i] = order[i], order[k]
			walk(k + 1)
			order[k], order[i] = order[i], order[k]
		}
	}
	walk(0)
}

// Whatever order the news of one task arrives in — the API's, the feed's,
// a lease watch's, a resync's, in both directions of time — the heap ends
// up holding the newest version's time.
// (The same for a task ID the heap packs as a UUID and one it does not.)
func TestHeapKeepsTheNewestNewsInEveryOrder(t *testing.T) {
	for _, id := range []string{"a", store.NewID()} {
		keepsTheNewestNews(t, id)
	}
}

func keepsTheNewestNews(t *testing.T, id string) {
	t0 := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	news := []store.Due{
		{ID: id, At: t0, Version: 0},                       // an older retryd's note: version unknown
		{ID: id, At: t0, Version: 1},                       // created (the API's hint, the feed's note)
		{ID: id, At: t0.Add(time.Minute), Version: 2},      // claimed: due at its lease's end (lease watch)
		{ID: id, At: t0.Add(time.Second), Version: 3},      // finished with a retry a second later
		{ID: id, At: t0.Add(61 * time.Second), Version: 4}, // claimed again
		{ID: id, At: t0.Add(2 * time.Second), Version: 5},  // finished with a retry again
	}
	newest := news[len(news)-1]
	permutations(len(news), func(order []int) {
		h := newDueHeap()
		for _, i := range order {
			h.set(news[i])
		}
		if h.Len() != 1 {
			t.Fatalf("order %v: %d entries, want 1", order, h.Len())
		}
		if got, _ := h.next(); !got.Equal(newest.At) {
			t.Fatalf("order %v: filed at %v, want %v", order, got, newest.At)
		}
		if got := h.popDue(newest.At, 1, nil); len(got) != 1 || got[0].id != id || got[0].version != newest.Version {
			t.Fatalf("order %v: popped %+v at %v, want v%d", order, got, newest.At, newest.Version)
		}
	})
}

// News of the version the heap holds can only bring the time forward; an
// end at an older version leaves a newer entry in place.
func TestHeapSameVersionAndRemove(t *testing.T) {
	t0 := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	h := newDueHeap()
	h.set(store.Due{ID: "a", At: t0.Add(time.Second), Version: 3})
	h.set(store.Due{ID: "a", At: t0.Add(2 * time.Second), Version: 3})
	if got, _ := h.next(); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("same version, later time: filed at %v, want %v", got, t0.Add(time.Second))
	}
	h.set(store.Due{ID: "a", At: t0, Version: 3})
	if got, _ := h.next(); !got.Equal(t0) {
		t.Errorf("same version, earlier time: filed at %v, want %v", got, t0)
	}
	h.remove("a", 2)
	if h.Len() != 1 {
		t.Error("an end at version 2 removed the entry of version 3")
	}
	h.remove("a", 3)
	if h.Len() != 0 {
		t.Error("an end at version 3 left the entry of version 3")
	}
}
