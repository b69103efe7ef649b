package dispatch

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/retrykit/retry"
)

// A target whose address is refused is refused before any connection is
// tried, through either client, whether the URL names the address or a
// host name that resolves to it. The dialer's own Control hook, which runs
// the guard and then lets connect(2) happen, counts the addresses that get
// past it. The addresses are IPv6 forms of refused IPv4 ones and ranges the
// guard once let through; none of them is reachable here, so an attempt
// that got past the guard would fail too, but as a retried network error.
func TestSendRefusesBeforeConnecting(t *testing.T) {
	t.Parallel()
	d := New(Config{ConnectTimeout: 300 * time.Millisecond, Timeout: time.Second})
	defer d.Close()
	// Names that resolve to refused addresses, as a name an attacker
	// controls may once it has been looked at.
	dns := serveDNS(t, map[string][]netip.Addr{
		"nat64.example.":   {netip.MustParseAddr("64:ff9b::a00:1")},
		"bench.example.":   {netip.MustParseAddr("198.18.0.1")},
		"rebound.example.": {netip.MustParseAddr("64:ff9b::a9fe:a9fe"), netip.MustParseAddr("100.64.0.1")},
	})
	d.dialer.Resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var nd net.Dialer
		return nd.DialContext(ctx, "udp", dns)
	}}
	var passed atomic.Int32
	guard := d.dialer.Control
	d.dialer.Control = func(network, address string, c syscall.RawConn) error {
		if err := guard(network, address, c); err != nil {
			return err
		}
		passed.Add(1) // connect(2) comes next
		t.Errorf("the guard let %s %s through", network, address)
		return nil
	}
	for _, u := range []string{
		"http://[64:ff9b::a00:1]/",
		"https://[64:ff9b::a00:1]/",
		"http://[64:ff9b::7f00:1]:8080/",
		"http://[64:ff9b::a9fe:a9fe]/latest/meta-data/",
		"http://[2002:a00:1::1]/",
		"http://[::7f00:1]/",
		"http://[fec0::1]/",
		"http://[5f00::1]/",
		"http://198.18.0.1/",
		"http://240.0.0.1/",
		"http://255.255.255.255/",
		"http://nat64.example/",
		"https://nat64.example/",
		"http://bench.example:8080/",
		"http://rebound.example/",
		"https://rebound.example/",
	} {
		res := d.Send(context.Background(), Request{Method: "POST", URL: u, Body: []byte("{}")})
		t.Logf("%s: %v", u, res.Err)
		if !errors.Is(res.Err, ErrTargetRefused) {
			t.Errorf("Send(%s) err = %v, want ErrTargetRefused", u, res.Err)
		}
		if o := res.Outcome(&retry.Policy{}); o != Fail {
			t.Errorf("Send(%s) outcome = %v, want fail", u, o)
		}
	}
	if n := passed.Load(); n != 0 {
		t.Errorf("%d connections were tried", n)
	}
}

// serveDNS answers A and AAAA questions for the names of hosts with their
// addresses, over UDP on 127.0.0.1, and returns its address.
func serveDNS(t *testing.T, hosts map[string][]netip.Addr) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true,
				RecursionDesired: h.RecursionDesired, RecursionAvailable: true})
			_ = b.StartQuestions()
			_ = b.Question(q)
			_ = b.StartAnswers()
			rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}
			for _, a := range hosts[q.Name.String()] {
				switch {
				case a.Is4() && q.Type == dnsmessage.TypeA:
					_ = b.AResource(rh, dnsmessage.AResource{A: a.As4()})
				case a.Is6() && q.Type == dnsmessage.TypeAAAA:
					_ = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: a.As16()})
				}
			}
			if msg, err := b.Finish(); err == nil {
				_, _ = pc.WriteTo(msg, from)
			}
		}
	}()
	return pc.LocalAddr().String()
}
