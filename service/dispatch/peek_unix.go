//go:build unix && !aix

package dispatch

import "syscall"

// peek looks with one recvfrom(2), MSG_PEEK and MSG_DONTWAIT. Under TLS it
// sees records, not what they carry: any record on an idle connection (a
// close_notify alert, or an answer nothing asked for) makes it unfit all
// the same.
func (p *peeker) peek() peekResult {
	p.n, p.err = 0, nil
	if rerr := p.raw.Read(p.try); rerr != nil {
		return peekClosed
	}
	switch {
	case p.err == syscall.EAGAIN || p.err == syscall.EWOULDBLOCK:
		return peekNothing
	case p.err == nil && p.n > 0:
		return peekData
	}
	return peekClosed
}

// recv is the look itself, done whatever it finds: it never waits.
func (p *peeker) recv(fd uintptr) bool {
	for {
		p.n, _, p.err = syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		if p.err != syscall.EINTR {
			return true
		}
	}
}
