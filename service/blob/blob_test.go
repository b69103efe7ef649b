package blob_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/retrykit/retry/service/blob"
)

func TestParseS3Ref(t *testing.T) {
	for ref, want := range map[string][2]string{
		"s3://bucket/key":             {"bucket", "key"},
		"s3://b/a/b/c.json":           {"b", "a/b/c.json"},
		"s3://b/with space%20and?q#f": {"b", "with space%20and?q#f"}, // as written
		"s3://b//leading":             {"b", "/leading"},
	} {
		bucket, key, err := blob.ParseS3Ref(ref)
		if err != nil || bucket != want[0] || key != want[1] {
			t.Errorf("ParseS3Ref(%q) = %q, %q, %v; want %q, %q", ref, bucket, key, err, want[0], want[1])
		}
	}
	for _, ref := range []string{"", "s3://", "s3://bucket", "s3://bucket/", "s3:///key", "S3://b/k", "blob:sha256:00", "https://b/k"} {
		if _, _, err := blob.ParseS3Ref(ref); !errors.Is(err, blob.ErrBadRef) {
			t.Errorf("ParseS3Ref(%q) = %v, want ErrBadRef", ref, err)
		}
	}
}

func TestParseHex(t *testing.T) {
	h := "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
	if sum, ok := blob.ParseHex(h); !ok || (blob.Blob{SHA256: sum}).Hex() != h {
		t.Errorf("ParseHex(%s) = %x, %v", h, sum, ok)
	}
	for _, s := range []string{"", h[:63], h + "0", strings.ToUpper(h), h[:63] + "g", h[:62] + "-1"} {
		if _, ok := blob.ParseHex(s); ok {
			t.Errorf("ParseHex(%q) = ok", s)
		}
	}
}
