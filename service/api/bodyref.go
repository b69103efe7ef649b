package api

import (
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/retrykit/retry/service/blob"
)

// MaxBodyRefKey is the longest object key a bodyRef may name, in bytes:
// S3's own limit.
const MaxBodyRefKey = 1024

// ParseBodyRefPrefix checks p, a place under which a tenant's bodyRefs may
// lie (a field of the tokens file, or of Config.AllowBodyRefs): s3://bucket/
// for a whole bucket, or s3://bucket/some/prefix/. It must end with '/', so
// that allowing s3://b/a/ does not also allow s3://b/ab/, and have no empty,
// "." or ".." segment.
func ParseBodyRefPrefix(p string) error {
	fail := func(why string) error {
		return fmt.Errorf("bodyRef prefix %.200q: %s", p, why)
	}
	rest, ok := strings.CutPrefix(p, "s3://")
	if !ok {
		return fail("want s3://bucket/ or s3://bucket/prefix/")
	}
	bucket, key, _ := strings.Cut(rest, "/")
	if !blob.ValidBucket(bucket) {
		return fail("want s3://bucket/ or s3://bucket/prefix/, the bucket 3 to 63 letters, digits, '.', '-' or '_'")
	}
	if !strings.HasSuffix(p, "/") {
		return fail("must end with '/', so that it does not also allow the keys that merely begin like it")
	}
	if key != "" {
		if why := checkKeyPath(strings.TrimSuffix(key, "/")); why != "" {
			return fail(why)
		}
	}
	return nil
}

// checkBodyRef says why ref, a caller's bodyRef, is not a reference to an
// object the caller may name, whoever the caller is; "" when it may be.
func checkBodyRef(ref string) string {
	if strings.HasPrefix(ref, "blob:") {
		return "blob: references are retryd's own blob store's, which callers may not give: " +
			"give the body inline (body or bodyBase64), or s3://bucket/key of an object you uploaded"
	}
	bucket, key, err := blob.ParseS3Ref(ref)
	if err != nil {
		return "must be s3://bucket/key, an object you uploaded"
	}
	if !blob.ValidBucket(bucket) {
		return "names no bucket: want 3 to 63 letters, digits, '.', '-' or '_'"
	}
	if len(key) > MaxBodyRefKey {
		return fmt.Sprintf("has a key of %d bytes; S3 keys are at most %d", len(key), MaxBodyRefKey)
	}
	return checkKeyPath(key)
}

// checkKeyPath says why key, an object key or a prefix of keys without its
// trailing '/', is refused: a segment that a server might resolve ("." and
// "..", which could lead out of an allowed prefix), an empty one, or a
// control character.
func checkKeyPath(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] < ' ' || key[i] == 0x7f {
			return "has a control character"
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return "has an empty segment (//, or a '/' at an end)"
		case ".", "..":
			return "has a \".\" or \"..\" segment"
		}
	}
	return ""
}

// blobConfig checks and takes the blob settings of cfg.
func (s *server) blobConfig(cfg Config) error {
	if s.blobs == nil {
		if len(cfg.AllowBodyRefs) > 0 || cfg.Tokens.HasBodyRefs() {
			return errors.New("api: bodyRef allow-lists need Config.Blobs, which reads the bodies")
		}
		return nil
	}
	if s.threshold > s.maxBody {
		return fmt.Errorf("api: Config.BlobThreshold (%d) is over MaxBodyBytes (%d): a task's row would hold more than a request may", s.threshold, s.maxBody)
	}
	if len(cfg.AllowBodyRefs) > 0 && cfg.Tokens != nil {
		return errors.New("api: Config.AllowBodyRefs is for authentication off; with Tokens, the tokens file lists each tenant's")
	}
	for _, p := range cfg.AllowBodyRefs {
		if err := ParseBodyRefPrefix(p); err != nil {
			return fmt.Errorf("api: Config.AllowBodyRefs: %w", err)
		}
	}
	s.defaultRefs = slices.Clone(cfg.AllowBodyRefs)
	s.ownRefs = ownRefPrefix(s.blobs)
	return nil
}

// ownRefPrefix returns where b, an s3:// blob store, keeps its blobs (its
// bucket and prefix: s3://bucket/prefix/), so that no caller's bodyRef may
// name them; "" for a store of another kind. It learns it from the store's
// Ref method (package s3's), whose references are
// s3://bucket/prefix/sha256/<hex>.
func ownRefPrefix(b blob.Store) string {
	r, ok := b.(interface{ Ref(sum [32]byte) string })
	if !ok {
		return ""
	}
	var zero [32]byte
	p, ok := strings.CutSuffix(r.Ref(zero), hex.EncodeToString(zero[:]))
	if !ok || !strings.HasPrefix(p, "s3://") {
		return ""
	}
	return strings.TrimSuffix(p, "sha256/")
}

// bodyRefRule returns the check of tenant's bodyRefs: why one is refused,
// or "". A ref must be s3://bucket/key (checkBodyRef), outside retryd's own
// blobs, and under one of the tenant's allowed prefixes.
func (s *server) bodyRefRule(tenant string) func(string) string {
	return func(ref string) string {
		if why := checkBodyRef(ref); why != "" {
			return why
		}
		if s.blobs == nil {
			return "is not accepted: this service keeps no blob store to read bodies from; give the body inline"
		}
		if s.blobs.Owns(ref) || s.ownRefs != "" && strings.HasPrefix(ref, s.ownRefs) {
			return "is in retryd's own blob store, which callers may not name: give the body inline, or an object you uploaded"
		}
		allowed := s.defaultRefs
		if s.tokens != nil {
			allowed = s.tokens.bodyRefs[tenant]
		}
		for _, p := range allowed {
			if strings.HasPrefix(ref, p) {
				return ""
			}
		}
		if len(allowed) == 0 {
			return fmt.Sprintf("is not accepted: tenant %q may name no bucket (its operator has allowed it none)", tenant)
		}
		return fmt.Sprintf("is outside what tenant %q may name: %s", tenant, strings.Join(allowed, ", "))
	}
}
