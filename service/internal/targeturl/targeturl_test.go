package targeturl_test

import (
	"strings"
	"testing"

	"github.com/retrykit/retry/service/internal/targeturl"
)

func TestCut(t *testing.T) {
	t.Parallel()
	type want struct {
		origin, safe, authority, host string
		port                          int
	}
	for in, w := range map[string]want{
		"https://user:secret@api.example/hooks/7?token=abc#frag": {"https://api.example", "https://api.example/hooks/7", "api.example", "api.example", 443},
		"http://127.0.0.1:8080/a%2Fb?x=1":                        {"http://127.0.0.1:8080", "http://127.0.0.1:8080/a%2Fb", "127.0.0.1:8080", "127.0.0.1", 8080},
		"http://h":                                               {"http://h", "http://h", "h", "h", 80},
		"http://h?q=@evil/x":                                     {"http://h", "http://h", "h", "h", 80},
		"http://h#@evil/x":                                       {"http://h", "http://h", "h", "h", 80},
		"http://u:p@h/x@y":                                       {"http://h", "http://h/x@y", "h", "h", 80},
		"http://a@b@host?x=/y":                                   {"http://host", "http://host", "host", "host", 80},
		"HTTPS://[::1]:81/p":                                     {"HTTPS://[::1]:81", "HTTPS://[::1]:81/p", "[::1]:81", "::1", 81},
		"https://[::1]/p":                                        {"https://[::1]", "https://[::1]/p", "[::1]", "::1", 443},
		"http://host:/x":                                         {"http://host:", "http://host:/x", "host:", "host", 80},
	} {
		u, ok := targeturl.Cut(in)
		host, port := u.HostPort()
		got := want{u.Origin(), u.Safe(), u.Authority, host, port}
		if !ok || got != w {
			t.Errorf("Cut(%q) = %+v, %v; want %+v", in, got, ok, w)
		}
	}
	for _, in := range []string{"", "no scheme", "://h", "mailto:someone@example.com"} {
		if u, ok := targeturl.Cut(in); ok {
			t.Errorf("Cut(%q) = %+v, want not ok", in, u)
		}
	}
}

// The common case, a URL without userinfo, allocates nothing.
func TestCutAllocatesNothing(t *testing.T) {
	n := testing.AllocsPerRun(100, func() {
		u, _ := targeturl.Cut("http://127.0.0.1:8080/hook?x=1")
		_, _ = u.Origin(), u.Safe()
		_, _ = u.HostPort()
	})
	if n != 0 {
		t.Errorf("Cut, Origin, Safe and HostPort allocate %v times, want 0", n)
	}
}

func FuzzCut(f *testing.F) {
	f.Add("https://user:secret@api.example:8443/hooks/7?token=abc#frag")
	f.Add("http://[::1]:81/p")
	f.Fuzz(func(t *testing.T, raw string) {
		u, ok := targeturl.Cut(raw)
		if !ok {
			return
		}
		for _, s := range []string{u.Origin(), u.Safe()} {
			if len(s) > len(raw) {
				t.Fatalf("Cut(%q): %q is longer than the URL", raw, s)
			}
		}
		if !strings.Contains(raw, u.Authority) {
			t.Fatalf("Cut(%q): authority %q is not in the URL", raw, u.Authority)
		}
	})
}
