//go:build !unix || aix

package dispatch

// leanHTTP is false where peek cannot look at a connection without
// waiting: h1 would then take what a target sent on an idle connection for
// the next answer, so http:// targets go through net/http too.
const leanHTTP = false

func peek(*h1Conn) peekResult { return peekNothing }
