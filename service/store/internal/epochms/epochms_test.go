package epochms_test

import (
	"testing"
	"time"

	"github.com/retrykit/retry/service/store/internal/epochms"
)

func TestRoundTrip(t *testing.T) {
	if v := epochms.Of(time.Time{}); v != 0 {
		t.Errorf("Of(zero) = %d, want 0", v)
	}
	if got := epochms.Time(0); !got.IsZero() {
		t.Errorf("Time(0) = %v, want the zero time", got)
	}
	in := time.Date(2031, 5, 6, 7, 8, 9, 123_456_789, time.FixedZone("x", 3600))
	v := epochms.Of(in)
	if got := epochms.Time(v); !got.Equal(in.Truncate(time.Millisecond)) || got.Location() != time.UTC {
		t.Errorf("Time(Of(%v)) = %v, want it cut to the ms, in UTC", in, got)
	}
}
