//go:build unix && !aix

package dispatch

import "syscall"

// leanHTTP says whether http:// targets go through h1: it needs peek,
// which needs a non-blocking MSG_PEEK.
const leanHTTP = true

// peek looks, without waiting and without taking anything, at what the
// target has sent on c: nothing, data, or the end of the connection.
func peek(c *h1Conn) peekResult {
	if c.raw == nil {
		return peekNothing
	}
	var (
		buf [1]byte
		n   int
		err error
	)
	if rerr := c.raw.Read(func(fd uintptr) bool {
		for {
			n, _, err = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if err != syscall.EINTR {
				return true // done, whatever it found: never wait
			}
		}
	}); rerr != nil {
		return peekClosed
	}
	switch {
	case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK:
		return peekNothing
	case err == nil && n > 0:
		return peekData
	}
	return peekClosed
}
