package headerjson_test

import (
	"maps"
	"testing"

	"github.com/retrykit/retry/service/store/internal/headerjson"
)

func TestRoundTrip(t *testing.T) {
	for _, h := range []map[string]string{nil, {}, {"Content-Type": "application/json", "X-A": "é\x00\""}} {
		s, err := headerjson.Encode(h)
		if err != nil {
			t.Fatal(err)
		}
		got, err := headerjson.Decode([]byte(s))
		if err != nil || !maps.Equal(got, h) || (len(h) == 0 && (s != "{}" || got != nil)) {
			t.Errorf("Decode(Encode(%v)) = %q → %v, %v", h, s, got, err)
		}
	}
	if h, err := headerjson.Decode(nil); h != nil || err != nil {
		t.Errorf("Decode(nothing) = %v, %v; want nil, nil", h, err)
	}
	if _, err := headerjson.Decode([]byte(`["not", "an object"]`)); err == nil {
		t.Error("Decode(an array) succeeded")
	}
}
