package scheduler

import (
	"container/heap"
	"time"

	"github.com/retrykit/retry/service/store"
)

// dueHeap is the scheduler's index of when each task next needs a worker:
// a PENDING task at its NextAttemptAt, an IN_FLIGHT one at its LeaseUntil
// (so an expired lease is reclaimed). Each entry remembers the version of
// the task its time came from, and news of an older version never moves
// it, in either direction: hints from the API, the change feed and a resync
// arrive in any order. It may still hold entries the store no longer agrees
// with; the store decides at claim time and reports when a task it refused
// is due (ClaimParams.Later), so a stale entry costs one wasted ID in a
// claim and nothing more. Not safe for concurrent use: the Scheduler guards
// it with its mutex.
type dueHeap struct {
	items entries
	byID  map[string]*entry
	kept  int64 // bytes of the requests entries keep, at most maxKeptRequestBytes
}

type entry struct {
	id      string
	due     time.Time
	version int64 // of the task, when due was read; 0 unknown
	index   int
	// req, if not nil, is the task as its last attempt had it, kept so
	// that its next claim need not read the request again (requests never
	// change); see keep.
	req *store.Task
}

// dueTask is an entry taken out of the heap to be claimed.
type dueTask struct {
	id      string
	version int64
	req     *store.Task // as entry.req
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

// set files d.ID at d.At, unless the heap holds news of a newer version of
// the task; news of the same version keeps the earlier time. It reports
// whether the task is now the earliest entry, which may call for an
// earlier timer.
func (h *dueHeap) set(d store.Due) (first bool) {
	if e, ok := h.byID[d.ID]; ok {
		switch {
		case d.Version < e.version:
			return false
		case d.Version == e.version && !d.At.Before(e.due):
			return false
		}
		e.due, e.version = d.At, d.Version
		heap.Fix(&h.items, e.index)
		return e.index == 0
	}
	e := &entry{id: d.ID, due: d.At, version: d.Version}
	h.byID[d.ID] = e
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

// remove drops id, a task that ended at version, unless the heap holds
// news of a newer version (a redrive's, say).
func (h *dueHeap) remove(id string, version int64) {
	if e, ok := h.byID[id]; ok && e.version <= version {
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
		out = append(out, dueTask{e.id, e.version, e.req})
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
