//go:build !unix

package dispatch

// peek cannot look without waiting here: it says nothing came.
func peek(*h1Conn) peekResult { return peekNothing }
