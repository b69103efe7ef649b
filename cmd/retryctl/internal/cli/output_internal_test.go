package cli

import (
	"strings"
	"testing"
)

func TestHuman(t *testing.T) {
	t.Parallel()
	for ms, want := range map[float64]string{
		0: "0ms", 0.4: "0ms", 850: "850ms", 999.6: "1s", 1000: "1s", 1234: "1.2s", 9940: "9.9s",
		9960: "10s", 42400: "42s", 59600: "1m", 250000: "4m10s", 3599000: "59m59s",
		7500000: "2h5m", 3600000: "1h", 86400000 + 4*3600000: "1d4h", -1: "-",
	} {
		if got := human(ms); got != want {
			t.Errorf("human(%v) = %q, want %q", ms, got, want)
		}
	}
}

func TestProgress(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	p := newProgress(&out, "redriven")
	p.tick() // nothing done yet
	for _, done := range []int{500, 999, 1000, 1500} {
		p.report(done)
	}
	p.tick()
	p.tick() // no more done since
	for _, done := range []int{1600, 2100} {
		p.report(done)
	}
	p.report(3700)
	want := "redriven 1000 …\nredriven 1500 …\nredriven 2100 …\nredriven 3700 …\n"
	if out.String() != want {
		t.Errorf("progress lines:\n%s\nwant:\n%s", out.String(), want)
	}
	p.start()
	p.end()
}
