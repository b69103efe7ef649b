//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sqlite

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
)

// A closed owner's lock is free at once, even while another descriptor of
// its file is open, as in a child this process has forked and not yet
// exec'd: a parallel test that started a process once made a Store
// reopened at that moment find its own file locked.
func TestClosedOwnerUnlocksWhileADescriptorLives(t *testing.T) {
	path := filepath.Join(t.TempDir(), "retryd.db")
	o, _, _, err := lockOwner(path)
	if err != nil {
		t.Fatal(err)
	}
	dup, err := syscall.Dup(int(o.f.Fd())) // what a fork's child holds
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(dup)
	if err := o.close(); err != nil {
		t.Fatal(err)
	}
	again, _, _, err := lockOwner(path)
	if err != nil {
		t.Fatalf("lockOwner after close = %v, want the lock (ErrLocked: %v)", err, errors.Is(err, ErrLocked))
	}
	again.close()
}
