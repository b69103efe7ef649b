package scheduler

import (
	"math"
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
//
// It holds an entry for every live task (a million of them is an ordinary
// load), so entries are compact and free of pointers, which the garbage
// collector then never scans: a slot of 40 bytes (the ID as the 16 bytes of
// its UUID, the due time in nanoseconds, the version, the heap position),
// 4 bytes of heap order and 5 to 11 of ID index (idIndex), some 56 bytes a
// task in all (BenchmarkHeapBytes) where a struct per task with a string ID
// and pointers, in a map by ID, took 189. IDs that are not UUIDs in the
// canonical lower-case form NewID makes (a caller's own, or a test's) still
// work, through maps of their own.
type dueHeap struct {
	slots slab    // by slot number; a free one has pos -1 and is on free
	order []int32 // slot numbers as a min-heap by due time
	free  []int32
	byID  idIndex // slot of each task whose ID is a UUID
	// byName and names hold the IDs that are not (see parseID), both ways.
	byName map[string]int32
	names  map[int32]string
	// reqs holds, by slot, a task as its last attempt had it, kept so that
	// its next claim need not read the request again (requests never
	// change); see keep.
	reqs map[int32]*store.Task
	kept int64 // bytes of the requests in reqs, at most maxKeptRequestBytes
}

type slot struct {
	id      [16]byte // the task ID, unless names holds it
	due     int64    // Unix nanoseconds, see nanos
	version int64    // of the task, when due was read; 0 unknown
	pos     int32    // in order
}

// dueTask is an entry taken out of the heap to be claimed.
type dueTask struct {
	id      string
	version int64
	req     *store.Task // as dueHeap.reqs
}

// maxKeptRequestBytes bounds the memory the heap spends on requests, and
// keptRequestHorizon how far ahead a retry may be due to have its request
// kept: one that waits longer would hold memory long to save one read.
const (
	maxKeptRequestBytes = 32 << 20
	keptRequestHorizon  = time.Minute
)

// minCompactSlots is the fewest slots the heap compacts: below it, the
// room free slots hold is not worth a rebuild.
const minCompactSlots = 1 << 14

func newDueHeap() *dueHeap { return &dueHeap{byID: newIDIndex(0)} }

// Len returns the number of entries.
func (h *dueHeap) Len() int { return len(h.order) }

// set files d.ID at d.At, unless the heap holds news of a newer version of
// the task; news of the same version keeps the earlier time. It reports
// whether the task is now the earliest entry, which may call for an
// earlier timer.
func (h *dueHeap) set(d store.Due) (first bool) {
	due := nanos(d.At)
	uid, isUUID := parseID(d.ID)
	i, ok := h.lookup(d.ID, uid, isUUID)
	if ok {
		s := h.slots.at(i)
		switch {
		case d.Version < s.version:
			return false
		case d.Version == s.version && due >= s.due:
			return false
		}
		s.due, s.version = due, d.Version
		if !h.down(int(s.pos)) {
			h.up(int(s.pos))
		}
		return h.slots.at(i).pos == 0
	}
	i = h.alloc()
	*h.slots.at(i) = slot{id: uid, due: due, version: d.Version, pos: int32(len(h.order))}
	if isUUID {
		h.byID.put(&h.slots, i)
	} else {
		if h.byName == nil {
			h.byName, h.names = make(map[string]int32), make(map[int32]string)
		}
		h.byName[d.ID], h.names[i] = i, d.ID
	}
	h.order = append(h.order, i)
	h.up(len(h.order) - 1)
	return h.slots.at(i).pos == 0
}

// lookup returns the slot of id, whose UUID parseID gave as uid, isUUID.
func (h *dueHeap) lookup(id string, uid [16]byte, isUUID bool) (int32, bool) {
	if isUUID {
		return h.byID.get(&h.slots, uid)
	}
	i, ok := h.byName[id]
	return i, ok
}

// find returns the slot of id.
func (h *dueHeap) find(id string) (int32, bool) {
	uid, isUUID := parseID(id)
	return h.lookup(id, uid, isUUID)
}

// alloc returns a slot for a new entry, a free one if there is one.
func (h *dueHeap) alloc() int32 {
	if n := len(h.free); n > 0 {
		i := h.free[n-1]
		h.free = h.free[:n-1]
		return i
	}
	return h.slots.add()
}

// keep has id's entry keep the request of t, if the budget allows.
func (h *dueHeap) keep(id string, t *store.Task) {
	i, ok := h.find(id)
	if !ok || h.reqs[i] != nil {
		return
	}
	if n := requestBytes(t); h.kept+n <= maxKeptRequestBytes {
		if h.reqs == nil {
			h.reqs = make(map[int32]*store.Task)
		}
		h.reqs[i] = t
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
	if i, ok := h.find(id); ok && h.slots.at(i).version <= version {
		h.removeAt(int(h.slots.at(i).pos))
		h.release(i)
	}
}

// next returns the earliest due time, or ok false when the heap is empty.
func (h *dueHeap) next() (due time.Time, ok bool) {
	if len(h.order) == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, h.slots.at(h.order[0]).due), true
}

// popDue removes up to limit entries due at or before now, earliest first,
// and appends them to out.
func (h *dueHeap) popDue(now time.Time, limit int, out []dueTask) []dueTask {
	end := nanos(now)
	for n := 0; n < limit && len(h.order) > 0; n++ {
		i := h.order[0]
		s := *h.slots.at(i)
		if s.due > end {
			break
		}
		out = append(out, dueTask{h.idOf(i), s.version, h.reqs[i]})
		h.removeAt(0)
		h.release(i)
	}
	return out
}

// idOf returns the task ID of slot i.
func (h *dueHeap) idOf(i int32) string {
	if id, ok := h.names[i]; ok {
		return id
	}
	return store.FormatID(h.slots.at(i).id)
}

// release forgets slot i, whose entry has left the heap, and compacts the
// slots once most are free, so that memory a burst of tasks took is given
// back when they are done.
func (h *dueHeap) release(i int32) {
	if id, ok := h.names[i]; ok {
		delete(h.byName, id)
		delete(h.names, i)
	} else {
		h.byID.del(&h.slots, i)
	}
	if t, ok := h.reqs[i]; ok {
		h.kept -= requestBytes(t)
		delete(h.reqs, i)
	}
	*h.slots.at(i) = slot{pos: -1}
	h.free = append(h.free, i)
	if h.slots.len() >= minCompactSlots && len(h.order) < h.slots.len()/4 {
		h.compact()
	}
}

// compact moves the entries to slots 0 to Len()-1, in heap order, and
// rebuilds the maps (Go's maps never shrink). It costs O(Len()), and runs
// only after three quarters of the slots were freed, which paid for it.
func (h *dueHeap) compact() {
	var slots slab
	byID := newIDIndex(len(h.order))
	var byName map[string]int32
	var names map[int32]string
	if len(h.names) > 0 {
		byName, names = make(map[string]int32, len(h.names)), make(map[int32]string, len(h.names))
	}
	var reqs map[int32]*store.Task
	if len(h.reqs) > 0 {
		reqs = make(map[int32]*store.Task, len(h.reqs))
	}
	order := make([]int32, len(h.order))
	for pos, old := range h.order {
		i := slots.add()
		s := slots.at(i)
		*s = *h.slots.at(old)
		s.pos = i
		order[pos] = i
		if id, ok := h.names[old]; ok {
			byName[id], names[i] = i, id
		} else {
			byID.put(&slots, i)
		}
		if t, ok := h.reqs[old]; ok {
			reqs[i] = t
		}
	}
	h.slots, h.order, h.free, h.byID, h.byName, h.names, h.reqs = slots, order, nil, byID, byName, names, reqs
}

// The heap proper: order is a binary min-heap of slot numbers by due time,
// and each slot's pos is where order holds it.

func (h *dueHeap) less(a, b int) bool { return h.slots.at(h.order[a]).due < h.slots.at(h.order[b]).due }

func (h *dueHeap) swap(a, b int) {
	h.order[a], h.order[b] = h.order[b], h.order[a]
	h.slots.at(h.order[a]).pos = int32(a)
	h.slots.at(h.order[b]).pos = int32(b)
}

func (h *dueHeap) up(j int) {
	for j > 0 {
		parent := (j - 1) / 2
		if !h.less(j, parent) {
			break
		}
		h.swap(parent, j)
		j = parent
	}
}

// down reports whether the entry at j moved.
func (h *dueHeap) down(j int) bool {
	start, n := j, len(h.order)
	for {
		c := 2*j + 1
		if c >= n || c < 0 {
			break
		}
		if r := c + 1; r < n && h.less(r, c) {
			c = r
		}
		if !h.less(c, j) {
			break
		}
		h.swap(j, c)
		j = c
	}
	return j > start
}

// removeAt takes the entry at position j out of order.
func (h *dueHeap) removeAt(j int) {
	n := len(h.order) - 1
	if j != n {
		h.swap(j, n)
	}
	h.order = h.order[:n]
	if j != n && !h.down(j) {
		h.up(j)
	}
}

// nanos returns t in Unix nanoseconds, exactly: a due time is never
// rounded, so the heap never asks the store for a task before the store
// considers it due. Times outside the years 1678 to 2262, which int64
// nanoseconds cannot hold, become the least or greatest int64: still in
// their order, and due at once or never.
func nanos(t time.Time) int64 {
	const maxSec = math.MaxInt64 / int64(time.Second)
	switch sec := t.Unix(); {
	case sec < -maxSec:
		return math.MinInt64
	case sec >= maxSec:
		return math.MaxInt64
	}
	return t.UnixNano()
}
