//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sqlite

import (
	"os"
	"syscall"
)

// errWouldBlock is what lockFile returns when another holds the lock.
var errWouldBlock error = syscall.EWOULDBLOCK

// lockFile takes an exclusive flock on f without waiting. flock locks
// belong to the open file, so a second Store of the same process is
// refused too, and the kernel drops the lock with the process.
func lockFile(f *os.File) (locked bool, err error) {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return false, err
	}
	return true, nil
}

// unlockFile drops the lock. Closing f alone would not while another copy
// of its descriptor is open: one a fork of this process holds until it
// execs (Go opens files close-on-exec, but a child between fork and exec
// has them all), so a Store reopened at that moment found its own file
// locked.
func unlockFile(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
