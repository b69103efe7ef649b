package stream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/retrykit/retry/service/blob"
)

func TestCopy(t *testing.T) {
	data := bytes.Repeat([]byte("abc"), 100_000)
	var out bytes.Buffer
	n, sum, err := Copy(context.Background(), &out, iotest.HalfReader(bytes.NewReader(data)))
	if err != nil || n != int64(len(data)) || sum != sha256.Sum256(data) || !bytes.Equal(out.Bytes(), data) {
		t.Errorf("Copy = %d, %x, %v; want %d, %x", n, sum, err, len(data), sha256.Sum256(data))
	}
	boom := errors.New("boom")
	if _, _, err := Copy(context.Background(), io.Discard, iotest.ErrReader(boom)); !errors.Is(err, boom) {
		t.Errorf("Copy of a failing reader = %v, want boom", err)
	}
	if _, _, err := Copy(context.Background(), failingWriter{boom}, strings.NewReader("x")); !errors.Is(err, boom) {
		t.Errorf("Copy to a failing writer = %v, want boom", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Copy(ctx, io.Discard, strings.NewReader("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Copy(cancelled) = %v, want context.Canceled", err)
	}
}

type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }

func TestVerify(t *testing.T) {
	data := []byte(strings.Repeat("0123456789", 1000))
	sum := sha256.Sum256(data)
	readers := map[string]func([]byte) io.Reader{
		"whole":    func(b []byte) io.Reader { return bytes.NewReader(b) },
		"one byte": func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) },
		"data+EOF": func(b []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(b)) },
	}
	for name, reader := range readers {
		t.Run(name, func(t *testing.T) {
			got, err := io.ReadAll(Verify(io.NopCloser(reader(data)), "ref", int64(len(data)), sum))
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("reading a sound blob = %d bytes, %v", len(got), err)
			}
			empty := sha256.Sum256(nil)
			if got, err := io.ReadAll(Verify(io.NopCloser(reader(nil)), "ref", 0, empty)); err != nil || len(got) != 0 {
				t.Errorf("reading an empty blob = %d bytes, %v", len(got), err)
			}
			flipped := append([]byte{}, data...)
			flipped[len(flipped)-1] = 'x'
			for what, c := range map[string]struct {
				data []byte
				size int64
			}{
				"flipped":   {flipped, int64(len(data))},
				"truncated": {data[:len(data)-1], int64(len(data))},
				"longer":    {append(append([]byte{}, data...), 'x'), int64(len(data))},
				"announced": {data, int64(len(data)) - 1},
			} {
				// All size bytes may be read only if they are the right ones,
				// and more are there: a "longer" blob read a byte at a time.
				got, err := io.ReadAll(Verify(io.NopCloser(reader(c.data)), "ref", c.size, sum))
				whole := int64(len(got)) >= c.size && !(what == "longer" && bytes.Equal(got, data))
				if !errors.Is(err, blob.ErrCorrupt) || whole {
					t.Errorf("%s: read %d bytes of %d, %v; want fewer, ErrCorrupt", what, len(got), c.size, err)
				}
			}
		})
	}
}

func TestWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := WithContext(ctx, io.NopCloser(strings.NewReader("abcdef")))
	if _, err := io.ReadFull(r, make([]byte, 3)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := r.Read(make([]byte, 3)); !errors.Is(err, context.Canceled) {
		t.Errorf("Read after cancel = %v, want context.Canceled", err)
	}
}
