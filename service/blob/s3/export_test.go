package s3

import (
	"context"
	"os"
)

// SetPartSizes sets the single PUT's limit and the part size of s's
// uploads, which tests lower so that multipart takes megabytes, not
// gigabytes.
func SetPartSizes(s *Store, single, part int64) { s.maxSinglePut, s.partSize = single, part }

// PutSingle is s.putSingle: one PUT of the n bytes of f at key, signed with
// sha256Hex.
func PutSingle(ctx context.Context, s *Store, key string, f *os.File, n int64, sha256Hex string) error {
	return s.putSingle(ctx, key, f, n, sha256Hex)
}
