package secrets

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// maxKeyFile bounds what LoadKeyFile reads, so that a path naming a device
// or a large file by mistake fails at once.
const maxKeyFile = 1 << 10

// LoadKeyFile reads a key file: KeySize random bytes in standard base64,
// as "openssl rand -base64 32" writes them, surrounding white space
// allowed. The key in path is the Keyring's current key; the keys in the
// files old name are the keys it replaced, which still open their tokens.
//
// A missing file's error wraps fs.ErrNotExist; a file that does not hold a
// key, ErrBadKey. Whether the file is readable by others is the caller's
// to check and warn of.
func LoadKeyFile(path string, old ...string) (*Keyring, error) {
	cur, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	olds := make([][]byte, len(old))
	for i, p := range old {
		if olds[i], err = readKeyFile(p); err != nil {
			return nil, err
		}
	}
	return NewKeyring(cur, olds...)
}

// readKeyFile returns the key path holds.
func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("secrets: key file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("secrets: key file: %w", err)
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("%w: key file %s is larger than %d bytes", ErrBadKey, path, maxKeyFile)
	}
	b = bytes.TrimSpace(b)
	key := make([]byte, base64.StdEncoding.DecodedLen(len(b)))
	n, err := base64.StdEncoding.Decode(key, b)
	if err != nil {
		return nil, fmt.Errorf("%w: key file %s is not base64: %w", ErrBadKey, path, err)
	}
	if n != KeySize {
		return nil, fmt.Errorf("%w: key file %s holds %d bytes, want %d", ErrBadKey, path, n, KeySize)
	}
	return key[:n], nil
}

// EnsureKeyFile loads the key file at path (see LoadKeyFile) or, when
// there is none, makes one with a new random key, readable by its owner
// only (mode 0600), and created is true.
//
// The new file appears whole or not at all: the key is written and synced
// to a temporary file in the same directory, which is then linked to
// path, and a link never replaces an existing file. Of several processes
// (or goroutines) that race to create path, one creates it and the others
// load the key it wrote; none sees a file half written, and a crash
// leaves no empty key file behind. This needs a file system with hard
// links, as every Unix file system has.
func EnsureKeyFile(path string) (kr *Keyring, created bool, err error) {
	kr, err = LoadKeyFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return kr, false, err
	}
	key := make([]byte, KeySize)
	rand.Read(key)
	switch err := writeKeyFile(path, key); {
	case errors.Is(err, fs.ErrExist):
		// Another process created it since the load above.
		kr, err = LoadKeyFile(path)
		return kr, false, err
	case err != nil:
		return nil, false, err
	}
	kr, err = NewKeyring(key)
	return kr, err == nil, err
}

// writeKeyFile creates path holding key, failing with an error that wraps
// fs.ErrExist when path exists.
func writeKeyFile(path string, key []byte) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	// os.CreateTemp creates the file with mode 0600.
	tmp, err := os.CreateTemp(dir, "."+base+".new-*")
	if err != nil {
		return fmt.Errorf("secrets: creating key file: %w", err)
	}
	defer os.Remove(tmp.Name()) // the link at path, if made, remains
	text := base64.StdEncoding.AppendEncode(nil, key)
	_, err = tmp.Write(append(text, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("secrets: writing key file: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		return fmt.Errorf("secrets: creating key file: %w", err)
	}
	// The new directory entry is durable only once the directory is
	// synced: without it a crash could lose a key that has sealed secrets.
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("secrets: syncing key file's directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("secrets: syncing key file's directory: %w", err)
	}
	return nil
}
