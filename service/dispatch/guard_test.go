package dispatch_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/retrykit/retry/service/dispatch"
)

func TestGuardCheck(t *testing.T) {
	t.Parallel()
	strict := dispatch.Guard{}
	private := dispatch.Guard{AllowPrivate: true}
	loopOnly := dispatch.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	metadata := dispatch.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("169.254.169.254/32")}}
	tests := []struct {
		name  string
		guard dispatch.Guard
		addr  string
		want  bool // allowed
	}{
		{"public v4", strict, "93.184.216.34", true},
		{"public v6", strict, "2606:2800:220:1::1", true},
		{"loopback", strict, "127.0.0.1", false},
		{"loopback other", strict, "127.3.4.5", false},
		{"loopback v6", strict, "::1", false},
		{"mapped loopback", strict, "::ffff:127.0.0.1", false},
		{"private 10", strict, "10.1.2.3", false},
		{"private 172", strict, "172.16.0.1", false},
		{"private 192", strict, "192.168.1.1", false},
		{"unique local v6", strict, "fd12::1", false},
		{"link-local", strict, "169.254.1.1", false},
		{"link-local v6", strict, "fe80::1", false},
		{"metadata v4", strict, "169.254.169.254", false},
		{"metadata v6", strict, "fd00:ec2::254", false},
		{"multicast", strict, "224.0.0.1", false},
		{"multicast v6", strict, "ff02::1", false},
		{"unspecified", strict, "0.0.0.0", false},
		{"unspecified v6", strict, "::", false},
		{"this network", strict, "0.1.2.3", false},
		{"cgnat", strict, "100.64.0.1", false},
		{"private allowed", private, "10.1.2.3", true},
		{"loopback allowed by private", private, "127.0.0.1", true},
		{"metadata not opened by private", private, "169.254.169.254", false},
		{"metadata v6 not opened by private", private, "fd00:ec2::254", false},
		{"allow cidr", loopOnly, "127.0.0.1", true},
		{"allow cidr mapped", loopOnly, "::ffff:127.0.0.1", true},
		{"outside allow cidr", loopOnly, "127.0.0.2", false},
		{"metadata by explicit cidr", metadata, "169.254.169.254", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.guard.Check(netip.MustParseAddr(tt.addr))
			if got := err == nil; got != tt.want {
				t.Fatalf("Check(%s) = %v, want allowed %v", tt.addr, err, tt.want)
			}
			if err != nil && !errors.Is(err, dispatch.ErrTargetRefused) {
				t.Fatalf("Check(%s) = %v, want ErrTargetRefused", tt.addr, err)
			}
		})
	}
}

// An IPv4 address and its IPv4-mapped IPv6 form are one address to the
// guard, whatever the address and the allowances.
func FuzzGuardMappedAgrees(f *testing.F) {
	f.Add([]byte{127, 0, 0, 1}, false)
	f.Add([]byte{10, 1, 2, 3}, true)
	f.Add([]byte{169, 254, 169, 254}, true)
	f.Add([]byte{8, 8, 8, 8}, false)
	f.Fuzz(func(t *testing.T, b []byte, allowPrivate bool) {
		if len(b) < 4 {
			return
		}
		v4 := netip.AddrFrom4([4]byte(b[:4]))
		mapped := netip.AddrFrom16(v4.As16())
		g := dispatch.Guard{AllowPrivate: allowPrivate}
		if e4, e6 := g.Check(v4), g.Check(mapped); (e4 == nil) != (e6 == nil) {
			t.Fatalf("Check(%s) = %v but Check(%s) = %v", v4, e4, mapped, e6)
		}
		if g.Check(v4) == nil && !allowPrivate && (v4.IsLoopback() || v4.IsPrivate() || v4.IsLinkLocalUnicast() || v4.IsUnspecified() || v4.IsMulticast()) {
			t.Fatalf("strict guard allowed %s", v4)
		}
	})
}
