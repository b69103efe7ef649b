//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package sqlite

import (
	"errors"
	"os"
)

var errWouldBlock = errors.New("would block")

// lockFile locks nothing where flock is missing (see Exclusive).
func lockFile(*os.File) (locked bool, err error) { return false, nil }

// unlockFile has nothing to drop where flock is missing.
func unlockFile(*os.File) error { return nil }
