package scheduler

import (
	"container/heap"
	"time"

	"github.com/retrykit/retry/service/store"
)

// dueHeap is the scheduler's index of when each task next needs a worker:
// a PENDING task at its NextAttemptAt, an IN_FLIGHT one at its LeaseUntil
// (so an expired lease is reclaimed). It may hold entries the store no
// longer agrees with; the store decides at claim time, so a stale entry
// costs one wasted ID in a claim and nothing more. Not safe for concurrent
// use: the Scheduler guards it with its mutex.
type dueHeap struct {
	items entries
	byID  map[string]*entry
	kept  int64 // bytes of the requests entries keep, at most maxKeptRequestBytes
}

type entry struct {
	id    string
	due   time.Time
	index int
	// req, if not nil, is the task as its last attempt had it, kept so
	// that its next claim need not read the request again (requests never
	// change); see keep.
	req *store.Task
}

// dueTask is an entry taken out of the heap to be claimed.
type dueTask struct {
	id  string
	req *store.Task // as entry.req
}

// maxKeptRequestBytes bounds the memory the heap spends on requests, and
// keptRequestHorizon how far ahead a retry may be due to have its request
// kept: one that waits longer would hold memory long to save one read.
const (
	maxKeptRequestBytes = 32 << 20
	keptRequestHorizon  = time.Minute
)

func newDueHeap() *dueHeap { return &dueHeap{byID: make(map[string]*entry)} }

// Len returns the number of entries.
func (h *dueHeap) Len() int { return len(h.items) }

// set files id at due, moving it if it is already there. It reports whether
// id is now the earliest entry, which may call for an earlier timer.
func (h *dueHeap) set(id string, due time.Time) (first bool) {
	if e, ok := h.byID[id]; ok {
		e.due = due
		heap.Fix(&h.items, e.index)
		return e.index == 0
	}
	e := &entry{id: id, due: due}
	h.byID[id] = e
	heap.Push(&h.items, e)
	return e.index == 0
}

// keep has id's entry keep the request of t, if the budget allows.
func (h *dueHeap) keep(id string, t *store.Task) {
	e, ok := h.byID[id]
	if !ok || e.req != nil {
		return
	}
	if n := requestBytes(t); h.kept+n <= maxKeptRequestBytes {
		e.req = t
		h.kept += n
	}
}

// requestBytes estimates the memory a kept request holds.
func requestBytes(t *store.Task) int64 {
	n := len(t.TargetURL) + len(t.Method) + len(t.Body) + 512 // the Task and its other fields
	for k, v := range t.Headers {
		n += len(k) + len(v) + 64
	}
	return int64(n)
}

// removeAt drops id if it is still filed at due: an entry moved since (a
// redrive's Wake after the task finished, say) is newer news and stays.
func (h *dueHeap) removeAt(id string, due time.Time) {
	if e, ok := h.byID[id]; ok && e.due.Equal(due) {
		heap.Remove(&h.items, e.index)
		h.drop(e)
	}
}

// drop forgets e, which has left the heap.
func (h *dueHeap) drop(e *entry) {
	delete(h.byID, e.id)
	if e.req != nil {
		h.kept -= requestBytes(e.req)
	}
}

// next returns the earliest due time, or ok false when the heap is empty.
func (h *dueHeap) next() (due time.Time, ok bool) {
	if len(h.items) == 0 {
		return time.Time{}, false
	}
	return h.items[0].due, true
}

// popDue removes up to limit entries due at or before now, earliest first,
// and appends them to out.
func (h *dueHeap) popDue(now time.Time, limit int, out []dueTask) []dueTask {
	for n := 0; n < limit && len(h.items) > 0 && !h.items[0].due.After(now); n++ {
		e := heap.Pop(&h.items).(*entry)
		h.drop(e)
		out = append(out, dueTask{e.id, e.req})
	}
	return out
}

// entries implements heap.Interface, ordered by due time.
type entries []*entry

func (es entries) Len() int           { return len(es) }
func (es entries) Less(i, j int) bool { return es[i].due.Before(es[j].due) }
func (es entries) Swap(i, j int) {
	es[i], es[j] = es[j], es[i]
	es[i].index = i
	es[j].index = j
}

func (es *entries) Push(x any) {
	e := x.(*entry)
	e.index = len(*es)
	*es = append(*es, e)
}

func (es *entries) Pop() any {
	old := *es
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*es = old[:len(old)-1]
	return e
}
