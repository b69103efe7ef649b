package sim

import "time"

// event is something that happens to one client at a point of virtual time.
// value carries what the event needs: the version a read saw, whether a
// write succeeded.
type event struct {
	at     time.Duration
	seq    uint64
	value  int64
	client int32
	kind   uint8
}

// queue is a binary min-heap of events by time, ties broken by the order
// they were pushed, so a run never depends on the heap's internals. It is
// written out rather than built on container/heap: the interface calls cost
// more than the simulation itself.
type queue struct {
	ev  []event
	seq uint64
}

func (q *queue) len() int { return len(q.ev) }

func before(a, b *event) bool { return a.at < b.at || a.at == b.at && a.seq < b.seq }

func (q *queue) push(e event) {
	e.seq = q.seq
	q.seq++
	q.ev = append(q.ev, e)
	i := len(q.ev) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !before(&q.ev[i], &q.ev[parent]) {
			break
		}
		q.ev[i], q.ev[parent] = q.ev[parent], q.ev[i]
		i = parent
	}
}

// peek returns the earliest event; the queue must not be empty.
func (q *queue) peek() event { return q.ev[0] }

// pop removes the earliest event.
func (q *queue) pop() {
	last := len(q.ev) - 1
	q.ev[0] = q.ev[last]
	q.ev = q.ev[:last]
	q.down()
}

// replace swaps the earliest event for e. A client's event is nearly always
// followed by its next one, and one sift down here costs half of a pop and a
// push.
func (q *queue) replace(e event) {
	e.seq = q.seq
	q.seq++
	q.ev[0] = e
	q.down()
}

func (q *queue) down() {
	n := len(q.ev)
	i := 0
	for {
		child := 2*i + 1
		if child >= n {
			return
		}
		if r := child + 1; r < n && before(&q.ev[r], &q.ev[child]) {
			child = r
		}
		if !before(&q.ev[child], &q.ev[i]) {
			return
		}
		q.ev[i], q.ev[child] = q.ev[child], q.ev[i]
		i = child
	}
}
