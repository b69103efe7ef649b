// Package blob keeps request bodies too large to hold in a task record. A
// task refers to its body by a reference string (its bodyRef), and dispatch
// reads the body from a Store at each attempt. Two implementations exist:
// package disk, the embedded default (files in a directory beside the
// embedded database), and package s3, any S3-compatible object store. Package
// blobtest is the conformance suite both run.
//
// # Content addressing
//
// A Store names a blob after the SHA-256 of its bytes, which Put computes
// while it streams them. The same bytes put twice give the same reference,
// so one blob may back several tasks: a blob is deleted by a sweep that finds
// no task referring to it, never because one task finished.
//
// # References
//
//   - blob:sha256:<hex> — a blob of the embedded store (package disk).
//   - s3://<bucket>/<prefix>/sha256/<hex> — a blob retryd put in an S3
//     bucket (package s3); <prefix>/ is absent when the store has none.
//   - s3://<bucket>/<key> — any other object: a caller-owned body, which
//     the caller uploaded and passed as bodyRef. The s3 store reads it (Open)
//     with its own endpoint and credentials, and never deletes or lists it.
//
// <hex> is the 64 lowercase hexadecimal digits of the SHA-256 of the bytes.
// A Store "owns" the references of its own form (Owns): those it lists,
// deletes, and checks against their hash when it reads them.
//
// # Orphans
//
// A process that dies after Put returned and before the task referring to
// the blob was committed leaves an orphan. List gives every owned blob with
// the time it was last put; a sweep deletes those that are older than a grace
// period and that no task refers to. Every Put of some bytes renews that
// time, even when the bytes were already stored, so a blob that a Put just
// returned is not older than the grace period, which must be longer than a
// Put and its task's commit take. One race remains, which Delete cannot
// close (S3 has no portable delete-if-unchanged): a Put that renews a blob
// between the sweep's List and its Delete loses the blob if its task
// commits after the sweep looked for references to it. A sweep keeps that
// window short by deleting right after it looks.
package blob

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Errors the Stores return, wrapped; callers test them with errors.Is.
var (
	// ErrNotFound: no blob or object answers to the reference.
	ErrNotFound = errors.New("blob not found")
	// ErrBadRef: the reference is malformed, or of a form this Store does
	// not read (an s3:// reference given to the embedded store, say).
	ErrBadRef = errors.New("not a blob reference this store reads")
	// ErrNotOwned: Delete was given a reference the Store reads but did not
	// create (a caller-owned s3:// object); nothing was deleted.
	ErrNotOwned = errors.New("not a blob this store owns")
	// ErrCorrupt: an owned blob's bytes do not hash to its reference (or
	// are not as long as the Store said), found while reading them.
	ErrCorrupt = errors.New("blob content does not match its reference")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("blob store closed")
)

// Blob is what Put stored.
type Blob struct {
	Ref    string   // the reference, to keep in the task and give to Open and Delete; ends with Hex()
	Size   int64    // the number of bytes
	SHA256 [32]byte // the SHA-256 of the bytes
}

// Hex returns the SHA-256 of the blob in lowercase hexadecimal.
func (b Blob) Hex() string { return hex.EncodeToString(b.SHA256[:]) }

// Info is what List tells of a blob.
type Info struct {
	Ref   string
	Size  int64
	PutAt time.Time // when a Put last stored these bytes (S3 keeps it to the second)
}

// Store keeps blobs. Its methods are safe for concurrent use.
type Store interface {
	// Put stores the bytes r yields until io.EOF and returns their Blob.
	// It streams them: memory use does not grow with their size. The
	// reference is derived from their SHA-256, computed on the way, so the
	// same bytes give the same reference whoever puts them and however
	// often. When Put returns nil the blob is durable: it survives a crash
	// of the process or of the machine (disk: the file and its directory
	// are fsynced; s3: the server acknowledged the object). When it returns
	// an error there is no reference to use, and nothing has become visible
	// (in List or to Open) unless the error came from making a blob that was
	// already complete durable (an fsync of its directory): such a blob is
	// whole, and an orphan for the sweep. An error of r is returned wrapped,
	// as is ctx's error once ctx is done. Put does not close r.
	Put(ctx context.Context, r io.Reader) (Blob, error)

	// Open returns a reader of the bytes ref refers to and their number,
	// for a request's body and its Content-Length. A missing blob or object
	// is an error wrapping ErrNotFound; a reference of a form the Store
	// does not read wraps ErrBadRef. The reader must be closed, and stops
	// with an error once ctx is done. Reading an owned blob checks its
	// bytes against the reference: if they differ, or their number is not
	// size, the reader fails with an error wrapping ErrCorrupt before it
	// yields the last of them, so that a target never receives a whole
	// wrong body. Each Open reads the blob afresh (at each attempt).
	Open(ctx context.Context, ref string) (r io.ReadCloser, size int64, err error)

	// Delete removes the owned blob ref. A blob that is not there is not
	// an error. A reference the Store reads but does not own (a caller's
	// object) is ErrNotOwned, one it does not read ErrBadRef, and neither
	// deletes anything. Readers already open may go on reading.
	Delete(ctx context.Context, ref string) error

	// List calls each for every owned blob, in no particular order, and
	// stops at the first error each returns, returning it. A blob put or
	// deleted during List may or may not be seen. each may call Delete.
	List(ctx context.Context, each func(Info) error) error

	// Owns reports whether ref is of the Store's own form: one of the
	// blobs Put makes, which List lists and Delete removes.
	Owns(ref string) bool

	// Close releases the Store's resources; the blobs stay. The other
	// methods return ErrClosed after it; a second Close returns nil.
	Close() error
}

// ParseS3Ref splits an s3://bucket/key reference. The key is taken as it
// is written, without percent-decoding, as the AWS CLI takes it; bucket and
// key must not be empty. Anything else wraps ErrBadRef.
func ParseS3Ref(ref string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(ref, "s3://")
	if !ok {
		return "", "", badRef(ref, "not s3://bucket/key")
	}
	bucket, key, ok = strings.Cut(rest, "/")
	if !ok || bucket == "" || key == "" {
		return "", "", badRef(ref, "not s3://bucket/key")
	}
	return bucket, key, nil
}

// ValidBucket reports whether b may be an S3 bucket's name, as this
// package's S3 store and the API's allow-lists take them: 3 to 63 letters,
// digits, '.', '-' or '_'.
func ValidBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for i := 0; i < len(b); i++ {
		if c := b[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// ParseHex returns the SHA-256 that s, 64 lowercase hexadecimal digits,
// spells, and whether it is one.
func ParseHex(s string) (sum [32]byte, ok bool) {
	if len(s) != 64 {
		return sum, false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return sum, false
		}
	}
	_, err := hex.Decode(sum[:], []byte(s))
	return sum, err == nil
}

func badRef(ref, why string) error {
	return fmt.Errorf("%w: %.200q: %s", ErrBadRef, ref, why)
}
