package dispatch

import (
	"sync"
	"time"
)

// pool keeps h1's idle connections, per dial address and in all, each for
// at most idleTimeout. The zero pool keeps none; set its limits first.
type pool struct {
	perHost     int
	total       int
	idleTimeout time.Duration

	mu     sync.Mutex
	idle   map[string][]*h1Conn // most recently used last
	n      int
	reaper *time.Timer // runs while any connection is idle
	closed bool        // by close: connections are no longer kept
}

// get takes the most recently used idle connection to addr that is still
// fit to carry a request, or returns nil. A connection is unfit when it
// has been idle too long, or when the target sent something while it was
// idle: it closed it, or it answered nothing that was asked (a 408 before
// hanging up, bytes past the end of the last response), which the next
// request would take for its answer.
func (p *pool) get(addr string) *h1Conn {
	for {
		c := p.take(addr)
		if c == nil {
			return nil
		}
		if time.Since(c.idleAt) < p.idleTimeout && peek(c) == peekNothing {
			return c
		}
		c.c.Close()
	}
}

// take removes the most recently used idle connection to addr from the
// pool.
func (p *pool) take(addr string) *h1Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.idle[addr]
	if len(l) == 0 {
		return nil
	}
	c := l[len(l)-1]
	l[len(l)-1] = nil
	if l = l[:len(l)-1]; len(l) == 0 {
		delete(p.idle, addr)
	} else {
		p.idle[addr] = l
	}
	p.n--
	return c
}

// put keeps c for the next request to its address, or closes it when the
// pool is full or closed.
func (p *pool) put(c *h1Conn) {
	p.mu.Lock()
	if p.closed || p.n >= p.total || len(p.idle[c.addr]) >= p.perHost {
		p.mu.Unlock()
		c.c.Close()
		return
	}
	c.idleAt = time.Now()
	if p.idle == nil {
		p.idle = make(map[string][]*h1Conn)
	}
	p.idle[c.addr] = append(p.idle[c.addr], c)
	p.n++
	if p.reaper == nil {
		p.reaper = time.AfterFunc(p.idleTimeout, p.reap)
	}
	p.mu.Unlock()
}

// reap closes the connections idle for longer than idleTimeout: the oldest
// of each address come first.
func (p *pool) reap() {
	cutoff := time.Now().Add(-p.idleTimeout)
	var old []*h1Conn
	p.mu.Lock()
	for addr, l := range p.idle {
		i := 0
		for i < len(l) && l[i].idleAt.Before(cutoff) {
			i++
		}
		old = append(old, l[:i]...)
		if i == len(l) {
			delete(p.idle, addr)
		} else if i > 0 {
			p.idle[addr] = append(l[:0:0], l[i:]...)
		}
		p.n -= i
	}
	if p.n > 0 {
		p.reaper.Reset(p.idleTimeout)
	} else {
		p.reaper = nil
	}
	p.mu.Unlock()
	for _, c := range old {
		c.c.Close()
	}
}

// close closes the idle connections, and those put back later.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle, p.n = nil, 0
	if p.reaper != nil {
		p.reaper.Stop()
		p.reaper = nil
	}
	p.mu.Unlock()
	for _, l := range idle {
		for _, c := range l {
			c.c.Close()
		}
	}
}
