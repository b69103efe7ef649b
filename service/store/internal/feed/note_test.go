package feed_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/feed"
)

var t0 = time.Date(2031, 5, 6, 7, 8, 9, 123_000_000, time.UTC)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		line string
		want store.Due
		ok   bool
	}{
		{feed.Note(store.Due{ID: "0b6c2f56-1f7e-4b1e-9a56-5d0c4b7d7a11", At: t0, Version: 3}),
			store.Due{ID: "0b6c2f56-1f7e-4b1e-9a56-5d0c4b7d7a11", At: t0, Version: 3}, true},
		{"id 1955001234567", store.Due{ID: "id", At: time.UnixMilli(1955001234567).UTC()}, true}, // an older retryd's: no version
		{"an id with spaces 5 7", store.Due{ID: "an id with spaces", At: time.UnixMilli(5).UTC(), Version: 7}, true},
		{"an id 5", store.Due{ID: "an id", At: time.UnixMilli(5).UTC()}, true},
		{"", store.Due{}, false},
		{"id", store.Due{}, false},
		{" 12", store.Due{}, false},
		{"id 1e3", store.Due{}, false},
		{"id 0 1", store.Due{}, false},
		{"id -5", store.Due{}, false},
		{"id 5 -7", store.Due{}, false},
		{"id\n5 7", store.Due{}, false},
	} {
		got, ok := feed.Parse(tc.line)
		if ok != tc.ok || got.ID != tc.want.ID || !got.At.Equal(tc.want.At) || got.Version != tc.want.Version {
			t.Errorf("Parse(%q) = %v, %v; want %v, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseMessage(t *testing.T) {
	var got []string
	skipped := feed.ParseMessage("a 1 1\nb 2\n\nc x\nd 3 4", func(d store.Due) { got = append(got, d.ID) })
	if want := []string{"a", "b", "d"}; !slices.Equal(got, want) || skipped != 1 {
		t.Errorf("ParseMessage = %v, skipped %d; want %v, skipped 1", got, skipped, want)
	}
}

// Notes come from the network: any line parses without panicking, into a
// due time after the epoch, a version not negative and an ID without line
// breaks, which Note writes back into a line that parses the same.
func FuzzParse(f *testing.F) {
	f.Add(feed.Note(store.Due{ID: store.NewID(), At: t0, Version: 3}))
	f.Add("x 1 2")
	f.Add("")
	f.Add("x 1")
	f.Add(" 12")
	f.Add("an id with spaces -9223372036854775808")
	f.Add("id 1e3")
	f.Add("id 5 -7")
	f.Fuzz(func(t *testing.T, line string) {
		d, ok := feed.Parse(line)
		if !ok {
			return
		}
		if d.ID == "" || strings.Contains(d.ID, "\n") || d.At.UnixMilli() <= 0 || d.Version < 0 {
			t.Fatalf("Parse(%q) = %v", line, d)
		}
		again, ok := feed.Parse(feed.Note(d))
		if !ok || again.ID != d.ID || !again.At.Equal(d.At) || again.Version != d.Version {
			t.Fatalf("Parse(Note(%v)) = %v, %v", d, again, ok)
		}
	})
}
