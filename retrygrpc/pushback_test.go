package retrygrpc_test

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/retrykit/retry/retrygrpc"
)

func TestParsePushback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		value  string
		want   time.Duration
		wantOK bool
	}{
		{name: "zero", value: "0", want: 0, wantOK: true},
		{name: "milliseconds", value: "250", want: 250 * time.Millisecond, wantOK: true},
		{name: "leading zeros", value: "007", want: 7 * time.Millisecond, wantOK: true},
		{name: "largest", value: "2147483647", want: math.MaxInt32 * time.Millisecond, wantOK: true},
		{name: "past 32 bits", value: "2147483648"},
		{name: "huge", value: "99999999999999999999999"},
		{name: "negative", value: "-1"},
		{name: "negative zero", value: "-0"},
		{name: "plus sign", value: "+5"},
		{name: "empty", value: ""},
		{name: "spaces", value: " 5"},
		{name: "fraction", value: "1.5"},
		{name: "unit", value: "5ms"},
		{name: "word", value: "soon"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := retrygrpc.ParsePushback(tt.value)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParsePushback(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func FuzzParsePushback(f *testing.F) {
	for _, s := range []string{"0", "250", "007", "2147483647", "2147483648", "-1", "-0", "+5", "", " 5", "1.5", "5ms", "soon", "１２"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := retrygrpc.ParsePushback(v)
		// The oracle: digits only, and a value that fits 32 signed bits.
		digits := v != ""
		for _, c := range []byte(v) {
			digits = digits && '0' <= c && c <= '9'
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if want := digits && err == nil; ok != want {
			t.Fatalf("ParsePushback(%q) ok = %v, want %v", v, ok, want)
		}
		if !ok {
			if d != 0 {
				t.Fatalf("ParsePushback(%q) = %v, false; want 0 when not ok", v, d)
			}
			return
		}
		if want := time.Duration(n) * time.Millisecond; d != want {
			t.Fatalf("ParsePushback(%q) = %v, want %v", v, d, want)
		}
		// What it parsed, written back, parses to the same.
		if again, ok := retrygrpc.ParsePushback(strconv.FormatInt(d.Milliseconds(), 10)); !ok || again != d {
			t.Fatalf("round trip of %v gave %v, %v", d, again, ok)
		}
	})
}
