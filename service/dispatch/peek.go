package dispatch

// peekResult is what peek found on a connection.
type peekResult int

const (
	peekNothing peekResult = iota // open, and nothing to read
	peekData                      // the target sent something
	peekClosed                    // the target closed it, or it failed
)
