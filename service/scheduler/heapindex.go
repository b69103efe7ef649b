package scheduler

import "hash/maphash"

// idIndex finds the slot of a packed task ID: an open-addressing hash table
// (linear probing) of slot numbers plus one, zero for an empty cell, whose
// keys are the IDs in the slots themselves. It takes 5 to 11 bytes a task
// where a map[[16]byte]int32 takes 24 to 48, which at a million live tasks
// is some 30 MB of heap, twice that at the collector's peak. The hash is
// seeded per index, so IDs chosen to collide cannot be found in advance.
type idIndex struct {
	seed  maphash.Seed
	cells []int32 // slot+1; len a power of two, at most 3/4 full
	n     int
}

func newIDIndex(n int) idIndex {
	x := idIndex{seed: maphash.MakeSeed()}
	x.cells = make([]int32, cellsFor(n))
	return x
}

// cellsFor is the table size for n IDs: a power of two, n at most 3/4 of it.
func cellsFor(n int) int {
	size := 8
	for size*3/4 < n {
		size *= 2
	}
	return size
}

func (x *idIndex) home(id *[16]byte) int {
	return int(maphash.Bytes(x.seed, id[:])) & (len(x.cells) - 1)
}

// get returns the slot of id.
func (x *idIndex) get(slots *slab, id [16]byte) (int32, bool) {
	mask := len(x.cells) - 1
	for c := x.home(&id); ; c = (c + 1) & mask {
		v := x.cells[c]
		if v == 0 {
			return 0, false
		}
		if slots.at(v-1).id == id {
			return v - 1, true
		}
	}
}

// put files slot i, holding an ID the index does not have yet.
func (x *idIndex) put(slots *slab, i int32) {
	if (x.n+1)*4 > len(x.cells)*3 {
		x.grow(slots, len(x.cells)*2)
	}
	x.insert(slots, i)
	x.n++
}

func (x *idIndex) insert(slots *slab, i int32) {
	mask := len(x.cells) - 1
	c := x.home(&slots.at(i).id)
	for x.cells[c] != 0 {
		c = (c + 1) & mask
	}
	x.cells[c] = i + 1
}

// grow moves the slots to a table of size cells.
func (x *idIndex) grow(slots *slab, size int) {
	old := x.cells
	x.cells = make([]int32, size)
	for _, v := range old {
		if v != 0 {
			x.insert(slots, v-1)
		}
	}
}

// del removes slot i, whose ID the index holds, shifting back the cells
// after it that would otherwise no longer be found (no tombstones, so
// lookups never slow down with churn).
func (x *idIndex) del(slots *slab, i int32) {
	mask := len(x.cells) - 1
	c := x.home(&slots.at(i).id)
	for x.cells[c] != i+1 {
		c = (c + 1) & mask
	}
	x.n--
	for {
		x.cells[c] = 0
		j := c
		for {
			j = (j + 1) & mask
			v := x.cells[j]
			if v == 0 {
				return
			}
			// v stays unless the hole at c lies between its home and j
			// (cyclically): then it moves into the hole.
			h := x.home(&slots.at(v - 1).id)
			if (j-h)&mask >= (j-c)&mask {
				x.cells[c] = v
				c = j
				break
			}
		}
	}
}
