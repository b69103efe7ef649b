package scheduler

import "math"

// slab holds the heap's slots in chunks of slabChunk. Growing it never
// copies slots, as appending to one slice would (leaving the old array to
// the collector: some 200 MB of garbage on the way to a million slots,
// which a restart's rebuild made at once), and it never holds more than one
// chunk unused, where a slice's capacity runs up to a quarter ahead.
type slab struct {
	chunks []*[slabChunk]slot
	n      int32 // slots handed out, free ones included
}

// slabChunk is the slots in a chunk: 160 KB of them.
const slabChunk = 1 << 12

func (s *slab) at(i int32) *slot { return &s.chunks[uint32(i)/slabChunk][uint32(i)%slabChunk] }

func (s *slab) len() int { return int(s.n) }

// add returns a new slot, zero.
func (s *slab) add() int32 {
	if s.n == math.MaxInt32 {
		panic("scheduler: more than 2³¹ live tasks")
	}
	if s.n%slabChunk == 0 {
		s.chunks = append(s.chunks, new([slabChunk]slot))
	}
	s.n++
	return s.n - 1
}
