package dispatch

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBound(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven byte", 10, "eleven …"},
		{"ab€€", 7, "ab…"},         // "ab€" is 5 bytes, "…" 3
		{"ab€€€", 9, "ab€…"},       // a cut inside the second € drops it
		{"a\xffb", 10, "a\uFFFDb"}, // repaired, nothing cut
		{"a\xff\xfe\xfdb", 5, "a\uFFFDb"},
		{strings.Repeat("\xffa", 4), 8, "\uFFFDa…"},
		{strings.Repeat("x", 100), 3, "…"},
	}
	for _, tt := range tests {
		if got := bound(tt.s, tt.max); got != tt.want {
			t.Errorf("bound(%q, %d) = %q, want %q", tt.s, tt.max, got, tt.want)
		}
	}
}

func FuzzBound(f *testing.F) {
	f.Add("ab€€€", uint16(9))
	f.Add(strings.Repeat("\xffa", 100), uint16(20))
	f.Add(strings.Repeat("\xff", 100)+"tail", uint16(5))
	f.Fuzz(func(t *testing.T, s string, n uint16) {
		max := int(n)%512 + len(ellipsis)
		got := bound(s, max)
		if len(got) > max || !utf8.ValidString(got) {
			t.Fatalf("bound(%q, %d) = %q: %d bytes, valid %v", s, max, got, len(got), utf8.ValidString(got))
		}
		if len(s) <= max && utf8.ValidString(s) && got != s {
			t.Fatalf("bound(%q, %d) = %q, want it unchanged", s, max, got)
		}
		if again := bound(got, max); again != got {
			t.Fatalf("bound(bound(%q, %d)) = %q, want %q", s, max, again, got)
		}
	})
}
