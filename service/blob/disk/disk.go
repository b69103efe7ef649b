// Package disk is retryd's embedded blob store: a blob.Store kept in a
// directory of files, beside the embedded database (retryd.blobs/ beside
// retryd.db, say). References are blob:sha256:<hex>.
//
// # Layout
//
//	<dir>/sha256/<h0h1>/<hex>   a blob, named after its SHA-256 <hex>, whose first two digits are h0h1; mode 0600
//	<dir>/tmp/                  the files Puts are writing; Open empties it
//
// The 256 directories under sha256/ keep each directory small; Open makes
// them all, so a Put never has to make one.
//
// # Durability
//
// Put writes the body to a new file in tmp/ while it hashes it, fsyncs the
// file, renames it to its name under sha256/ and fsyncs that directory; only
// then does it return. A crash before the rename leaves a file in tmp/ that
// the next Open removes; after the directory's fsync the blob is there
// whole. A Put of bytes already stored writes them again and renames its
// file over the old one, which renews the blob's time in List (its
// modification time) and repairs a damaged copy. Delete does not fsync: a
// blob deleted just before a crash of the machine may come back, and the
// next sweep deletes it again.
//
// Open checks a blob's bytes against its name while they are read (see
// blob.Store.Open), at the cost of hashing them at each attempt.
//
// One process uses a directory at a time: Open empties tmp/, which would
// fail another process's Puts in progress.
package disk

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"

	"github.com/retrykit/retry/service/blob"
	"github.com/retrykit/retry/service/blob/internal/stream"
)

// RefPrefix begins the references of this store: blob:sha256:<hex>.
const RefPrefix = "blob:sha256:"

// Ref returns the reference of the blob whose SHA-256 is sum.
func Ref(sum [32]byte) string { return RefPrefix + hex.EncodeToString(sum[:]) }

// Store is the embedded blob.Store.
type Store struct {
	root   string // <dir>/sha256
	tmp    string // <dir>/tmp
	closed atomic.Bool
}

var _ blob.Store = (*Store)(nil)

// Open opens the store in dir, making dir (mode 0700) and its layout when
// they are missing, and removes the files that Puts interrupted by a crash
// left in dir/tmp.
func Open(dir string) (*Store, error) {
	s := &Store{root: filepath.Join(dir, "sha256"), tmp: filepath.Join(dir, "tmp")}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("blob: %w", err)
	}
	if err := os.RemoveAll(s.tmp); err != nil {
		return nil, fmt.Errorf("blob: emptying %s: %w", s.tmp, err)
	}
	made, err := mkdir(s.tmp)
	if err != nil {
		return nil, err
	}
	madeRoot, err := mkdir(s.root)
	if err != nil {
		return nil, err
	}
	if made || madeRoot {
		if err := syncDir(dir); err != nil {
			return nil, err
		}
	}
	madeSub := false
	for i := range 256 {
		made, err := mkdir(filepath.Join(s.root, fmt.Sprintf("%02x", i)))
		if err != nil {
			return nil, err
		}
		madeSub = madeSub || made
	}
	if madeSub {
		if err := syncDir(s.root); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// mkdir makes dir (mode 0700) unless it exists, and says whether it did.
func mkdir(dir string) (bool, error) {
	err := os.Mkdir(dir, 0o700)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrExist) {
		if fi, serr := os.Stat(dir); serr == nil && fi.IsDir() {
			return false, nil
		}
	}
	return false, fmt.Errorf("blob: %w", err)
}

// syncDir fsyncs directory dir, making the entries made or renamed in it
// durable. Windows cannot open a directory to sync it, and makes renames
// durable without it.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("blob: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("blob: fsync of directory %s: %w", dir, err)
	}
	return nil
}

// path returns the file of ref, or an error wrapping blob.ErrBadRef.
func (s *Store) path(ref string) (string, [32]byte, error) {
	h, ok := strings.CutPrefix(ref, RefPrefix)
	sum, valid := blob.ParseHex(h)
	if !ok || !valid {
		return "", sum, fmt.Errorf("%w: %.200q is not %s<64 lowercase hex digits>", blob.ErrBadRef, ref, RefPrefix)
	}
	return filepath.Join(s.root, h[:2], h), sum, nil
}

// Put implements blob.Store. See the package's documentation for how it
// makes the blob durable.
func (s *Store) Put(ctx context.Context, r io.Reader) (blob.Blob, error) {
	if s.closed.Load() {
		return blob.Blob{}, blob.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return blob.Blob{}, err
	}
	f, err := os.CreateTemp(s.tmp, "put-*")
	if err != nil {
		return blob.Blob{}, fmt.Errorf("blob: put: %w", err)
	}
	renamed := false
	defer func() {
		if !renamed {
			_ = f.Close() // a second Close only errors
			_ = os.Remove(f.Name())
		}
	}()
	n, sum, err := stream.Copy(ctx, f, r)
	if err != nil {
		return blob.Blob{}, fmt.Errorf("blob: put: %w", err)
	}
	if err := f.Sync(); err != nil {
		return blob.Blob{}, fmt.Errorf("blob: put: fsync: %w", err)
	}
	if err := f.Close(); err != nil {
		return blob.Blob{}, fmt.Errorf("blob: put: %w", err)
	}
	if err := ctx.Err(); err != nil { // the last moment nothing is visible yet
		return blob.Blob{}, err
	}
	b := blob.Blob{Ref: Ref(sum), Size: n, SHA256: sum}
	name, _, _ := s.path(b.Ref)
	if err := os.Rename(f.Name(), name); err != nil {
		return blob.Blob{}, fmt.Errorf("blob: put: %w", err)
	}
	renamed = true
	// An error now leaves the blob in place, whole: an orphan for the sweep,
	// or the blob of another Put of the same bytes.
	if err := syncDir(filepath.Dir(name)); err != nil {
		return blob.Blob{}, fmt.Errorf("blob: put: %w", err)
	}
	return b, nil
}

// Open implements blob.Store.
func (s *Store) Open(ctx context.Context, ref string) (io.ReadCloser, int64, error) {
	if s.closed.Load() {
		return nil, 0, blob.ErrClosed
	}
	name, sum, err := s.path(ref)
	if err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, fmt.Errorf("%w: %s", blob.ErrNotFound, ref)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("blob: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, 0, fmt.Errorf("blob: %w", err)
	}
	return stream.WithContext(ctx, stream.Verify(f, ref, fi.Size(), sum)), fi.Size(), nil
}

// Delete implements blob.Store. Every reference this store reads is its own.
func (s *Store) Delete(ctx context.Context, ref string) error {
	if s.closed.Load() {
		return blob.ErrClosed
	}
	name, _, err := s.path(ref)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blob: %w", err)
	}
	return nil
}

// List implements blob.Store, directory by directory. Files that are not
// blobs (not named <hex>) are left out.
func (s *Store) List(ctx context.Context, each func(blob.Info) error) error {
	for i := range 256 {
		if s.closed.Load() {
			return blob.ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		sub := fmt.Sprintf("%02x", i)
		entries, err := os.ReadDir(filepath.Join(s.root, sub))
		if err != nil {
			return fmt.Errorf("blob: list: %w", err)
		}
		for _, e := range entries {
			if _, ok := blob.ParseHex(e.Name()); !ok || !strings.HasPrefix(e.Name(), sub) || !e.Type().IsRegular() {
				continue
			}
			fi, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // deleted since ReadDir
			}
			if err != nil {
				return fmt.Errorf("blob: list: %w", err)
			}
			if err := each(blob.Info{Ref: RefPrefix + e.Name(), Size: fi.Size(), PutAt: fi.ModTime()}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Owns implements blob.Store: the references of the form blob:sha256:<hex>.
func (s *Store) Owns(ref string) bool {
	_, _, err := s.path(ref)
	return err == nil
}

// Close implements blob.Store. Readers already open go on working.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}
