package pagetoken_test

import (
	"errors"
	"testing"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/pagetoken"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		kind string
		key  string
	}{
		{name: "empty key", kind: "p", key: ""},
		{name: "id", kind: "policy", key: "payments-v2"},
		{name: "colons and unicode", kind: "p", key: "a:b:ç"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := pagetoken.Decode(tt.kind, pagetoken.Encode(tt.kind, tt.key))
			if err != nil || got != tt.key {
				t.Fatalf("Decode(Encode(%q)) = %q, %v; want %q, nil", tt.key, got, err, tt.key)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		token string
	}{
		{name: "not base64", token: "%%%"},
		{name: "other kind", token: pagetoken.EncodeInt("attempt", 7)},
		{name: "not a number", token: pagetoken.Encode("task", "x")},
		{name: "zero", token: pagetoken.EncodeInt("task", 0)},
		{name: "negative", token: pagetoken.EncodeInt("task", -3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := pagetoken.DecodeInt("task", tt.token); !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("DecodeInt(%q) error = %v, want ErrInvalid", tt.token, err)
			}
		})
	}
}

func FuzzDecodeInt(f *testing.F) {
	f.Add(pagetoken.EncodeInt("task", 42))
	f.Add("")
	f.Add("dGFzazo=")
	f.Add("!!")
	f.Fuzz(func(t *testing.T, token string) {
		n, err := pagetoken.DecodeInt("task", token)
		if err != nil {
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("DecodeInt(%q) error %v does not wrap ErrInvalid", token, err)
			}
			return
		}
		if n <= 0 {
			t.Fatalf("DecodeInt(%q) = %d, want a positive key", token, n)
		}
		if again, err := pagetoken.DecodeInt("task", pagetoken.EncodeInt("task", n)); err != nil || again != n {
			t.Fatalf("round trip of %d = %d, %v", n, again, err)
		}
	})
}
