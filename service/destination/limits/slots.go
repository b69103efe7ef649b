package limits

import "container/heap"

// slots are one key's slots in flight, by name and by expiry, so that a
// call finds the expired ones, and a release its own, without reading the
// others: a cap may be many thousands.
type slots struct {
	byName map[string]*slot
	heap   slotHeap // earliest expiry first
}

type slot struct {
	name string
	exp  int64 // µs
	i    int   // index in the heap
}

// add takes the slot name until exp.
func (s *slots) add(name string, exp int64) {
	if s.byName == nil {
		s.byName = map[string]*slot{}
	}
	sl := &slot{name: name, exp: exp}
	s.byName[name] = sl
	heap.Push(&s.heap, sl)
}

// remove frees the slot name, if it is held.
func (s *slots) remove(name string) {
	if sl, ok := s.byName[name]; ok {
		delete(s.byName, name)
		heap.Remove(&s.heap, sl.i)
	}
}

// live drops the slots expired at now and returns how many are left.
func (s *slots) live(now int64) int {
	for len(s.heap) > 0 && s.heap[0].exp <= now {
		delete(s.byName, heap.Pop(&s.heap).(*slot).name)
	}
	return len(s.heap)
}

// slotHeap is a container/heap of slots by expiry.
type slotHeap []*slot

func (h slotHeap) Len() int           { return len(h) }
func (h slotHeap) Less(i, j int) bool { return h[i].exp < h[j].exp }
func (h slotHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].i, h[j].i = i, j
}

func (h *slotHeap) Push(x any) {
	sl := x.(*slot)
	sl.i = len(*h)
	*h = append(*h, sl)
}

func (h *slotHeap) Pop() any {
	old := *h
	sl := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return sl
}
