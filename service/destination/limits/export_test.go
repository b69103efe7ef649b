package limits

// KeysHeld returns how many keys l holds state for.
func KeysHeld(l *Local) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}
