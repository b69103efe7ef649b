package dispatch

import "syscall"

// peekResult is what peek found on a connection.
type peekResult int

const (
	peekNothing peekResult = iota // open, and nothing to read
	peekData                      // the target sent something
	peekClosed                    // the target closed it, or it failed
)

// peeker looks at what the target has sent on a connection that sits idle.
// It is made once for the connection, so that a look allocates nothing.
type peeker struct {
	raw syscall.RawConn
	try func(fd uintptr) bool // recv, as given to raw.Read
	buf [1]byte
	n   int
	err error
}

// peek looks, without waiting and without taking anything, at what the
// target has sent on c: nothing, data, or the end of the connection.
func (c *conn) peek() peekResult {
	if c.peeker == nil {
		return peekNothing
	}
	return c.peeker.peek()
}
