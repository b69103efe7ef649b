//go:build !unix || aix

package dispatch

// peek cannot look at a connection without waiting here (AIX has no
// MSG_DONTWAIT): a pooled connection is taken as it is, as fasthttp takes
// it. One the target closed while idle fails the attempt, or is replaced
// for a replayable request (errStale).
func (p *peeker) peek() peekResult { return peekNothing }

func (p *peeker) recv(uintptr) bool { return true }
