package targethost

import (
	"strings"
	"testing"
)

func TestOf(t *testing.T) {
	for in, want := range map[string]string{
		"http://example.com/hook":                  "example.com",
		"https://Example.COM:8443/p?q=1#f":         "example.com:8443",
		"http://user:pw@Host.example:80/":          "host.example:80",
		"http://a@b@host?x=/y":                     "host",
		"HTTP://[::1]:9000":                        "[::1]:9000",
		"http://host.example?q=http://other.host/": "host.example",
		"http://host.example#http://other.host/":   "host.example",
		"http://host:/x":                           "host:",
		"mailto:someone@example.com":               "",
		"http://bad host/":                         "bad host", // the API validates URLs; this only cuts
		"":                                         "",
	} {
		if got := Of(in); got != want {
			t.Errorf("Of(%q) = %q, want %q", in, got, want)
		}
		if want != "" && (!Matches(in, want) || !Matches(in, strings.ToUpper(want)) || Matches(in, want+"x")) {
			t.Errorf("Matches(%q, %q) is wrong", in, want)
		}
	}
}
