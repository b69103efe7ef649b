package disk_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrykit/retry/service/blob"
	"github.com/retrykit/retry/service/blob/blobtest"
	"github.com/retrykit/retry/service/blob/disk"
)

func TestConformance(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store {
		s, err := disk.Open(filepath.Join(t.TempDir(), "retryd.blobs"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func put(t *testing.T, s *disk.Store, data string) blob.Blob {
	t.Helper()
	b, err := s.Put(context.Background(), strings.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readAll(s *disk.Store, ref string) ([]byte, error) {
	r, _, err := s.Open(context.Background(), ref)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// TestLayout: where a blob's file is, under what name and mode.
func TestLayout(t *testing.T) {
	dir := t.TempDir()
	s, err := disk.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := put(t, s, "hello")
	const sum = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" // sha256("hello")
	if b.Ref != "blob:sha256:"+sum || b.Size != 5 {
		t.Errorf("Put(hello) = %+v, want blob:sha256:%s of 5 bytes", b, sum)
	}
	data, err := os.ReadFile(filepath.Join(dir, "sha256", "2c", sum))
	if err != nil || string(data) != "hello" {
		t.Errorf("the blob's file holds %q, %v", data, err)
	}
	for _, name := range []string{filepath.Join(dir, "sha256"), filepath.Join(dir, "tmp"), filepath.Join(dir, "sha256", "2c"), filepath.Join(dir, "sha256", "2c", sum)} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s has mode %v, want none for group and others", name, perm)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(entries) != 0 {
		t.Errorf("tmp/ holds %d files after a Put, want none", len(entries))
	}
}

// TestReopen: the blobs are there after Open again; what an interrupted
// Put left in tmp/ is not; other files are left alone and not listed.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := disk.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := put(t, s, "kept")
	s.Close()
	leftover := filepath.Join(dir, "tmp", "put-123")
	stray := filepath.Join(dir, "sha256", "00", "README")
	for _, name := range []string{leftover, stray} {
		if err := os.WriteFile(name, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err = disk.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if data, err := readAll(s, b.Ref); err != nil || string(data) != "kept" {
		t.Errorf("after reopening, %s reads %q, %v", b.Ref, data, err)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open left %s: %v", leftover, err)
	}
	if _, err := os.Stat(stray); err != nil {
		t.Errorf("Open removed %s: %v", stray, err)
	}
	var refs []string
	if err := s.List(context.Background(), func(in blob.Info) error { refs = append(refs, in.Ref); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(refs) != 1 || refs[0] != b.Ref {
		t.Errorf("List = %v, want [%s]", refs, b.Ref)
	}
}

// TestCorrupt: a blob whose file changed fails to read, before its end.
func TestCorrupt(t *testing.T) {
	dir := t.TempDir()
	s, err := disk.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	body := bytes.Repeat([]byte("0123456789"), 100_000)
	b, err := s.Put(context.Background(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "sha256", b.Hex()[:2], b.Hex())
	for what, data := range map[string][]byte{
		"flipped":   append(append([]byte{}, body[:len(body)-1]...), 'x'),
		"truncated": body[:len(body)-1],
		"longer":    append(append([]byte{}, body...), 'x'),
		"empty":     nil,
	} {
		t.Run(what, func(t *testing.T) {
			if err := os.WriteFile(name, data, 0o600); err != nil {
				t.Fatal(err)
			}
			r, size, err := s.Open(context.Background(), b.Ref)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			n, err := io.Copy(io.Discard, r)
			if !errors.Is(err, blob.ErrCorrupt) {
				t.Errorf("reading a %s blob = %d bytes, %v; want ErrCorrupt", what, n, err)
			}
			if n >= size && size > 0 {
				t.Errorf("reading a %s blob gave all its %d bytes before failing", what, n)
			}
		})
	}
	// A Put of the bytes repairs the blob.
	if _, err := s.Put(context.Background(), bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	if data, err := readAll(s, b.Ref); err != nil || !bytes.Equal(data, body) {
		t.Errorf("after a Put of its bytes, the blob reads %d bytes, %v", len(data), err)
	}
}

// TestOpenErrors: a directory that cannot be made.
func TestOpenErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := disk.Open(file); err == nil {
		t.Errorf("Open(a file) = nil error")
	}
	if _, err := disk.Open(filepath.Join(file, "sub")); err == nil {
		t.Errorf("Open(under a file) = nil error")
	}
}
