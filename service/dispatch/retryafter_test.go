package dispatch_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/retrykit/retry/service/dispatch"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"empty", "", 0, false},
		{"seconds", "120", 120 * time.Second, true},
		{"zero", "0", 0, true},
		{"spaces", " 7 ", 7 * time.Second, true},
		{"negative", "-1", 0, false},
		{"fraction", "1.5", 0, false},
		{"huge", "99999999999999999999999", 365 * 24 * time.Hour, true},
		{"over a year", "40000000", 365 * 24 * time.Hour, true},
		{"date ahead", now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{"date past", now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"garbage", "soon", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := dispatch.ParseRetryAfter(tt.in, now)
			if got != tt.want || ok != tt.wantOK {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "120", "-5", "1e9", "Wed, 21 Oct 2015 07:28:00 GMT", "18446744073709551616", " 3"} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := dispatch.ParseRetryAfter(s, now)
		if d < 0 || d > 365*24*time.Hour {
			t.Fatalf("ParseRetryAfter(%q) = %v, out of [0, 1y]", s, d)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v with ok false", s, d)
		}
	})
}
