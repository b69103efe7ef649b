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

// Every range the guard refuses, as the IANA special-purpose registries
// list them (guard.go says why each): addresses inside it are refused by
// the strict guard, and global addresses next to it are allowed.
func TestGuardRanges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		block   string
		inside  []string
		outside []string // global neighbours
	}{
		// IPv4
		{"0.0.0.0/8", []string{"0.0.0.0", "0.1.2.3", "0.255.255.255"}, []string{"1.0.0.1"}},
		{"10.0.0.0/8", []string{"10.0.0.1", "10.255.255.254"}, []string{"9.255.255.254", "11.0.0.1"}},
		{"100.64.0.0/10", []string{"100.64.0.1", "100.127.255.254"}, []string{"100.63.255.254", "100.128.0.1"}},
		{"127.0.0.0/8", []string{"127.0.0.1", "127.255.255.254"}, []string{"126.255.255.254", "128.0.0.1"}},
		{"169.254.0.0/16", []string{"169.254.0.1", "169.254.255.254"}, []string{"169.253.255.254", "169.255.0.1"}},
		{"172.16.0.0/12", []string{"172.16.0.1", "172.31.255.254"}, []string{"172.15.255.254", "172.32.0.1"}},
		// Refused whole, the globally reachable anycast .9 and .10 included.
		{"192.0.0.0/24", []string{"192.0.0.1", "192.0.0.8", "192.0.0.9", "192.0.0.10", "192.0.0.170", "192.0.0.255"}, []string{"191.255.255.254", "192.0.1.1"}},
		{"192.0.2.0/24", []string{"192.0.2.1", "192.0.2.255"}, []string{"192.0.1.255", "192.0.3.1"}},
		{"192.88.99.0/24", []string{"192.88.99.1", "192.88.99.2"}, []string{"192.88.98.255", "192.88.100.1"}},
		{"192.168.0.0/16", []string{"192.168.0.1", "192.168.255.254"}, []string{"192.167.255.254", "192.169.0.1"}},
		{"198.18.0.0/15", []string{"198.18.0.1", "198.19.255.254"}, []string{"198.17.255.254", "198.20.0.1"}},
		{"198.51.100.0/24", []string{"198.51.100.1"}, []string{"198.51.99.255", "198.51.101.1"}},
		{"203.0.113.0/24", []string{"203.0.113.1"}, []string{"203.0.112.255", "203.0.114.1"}},
		{"224.0.0.0/4", []string{"224.0.0.1", "239.255.255.250"}, []string{"223.255.255.254"}},
		{"240.0.0.0/4", []string{"240.0.0.1", "255.255.255.254"}, []string{"223.255.255.254"}},
		{"255.255.255.255/32", []string{"255.255.255.255"}, []string{"223.255.255.254"}},
		// Globally reachable special-purpose blocks, allowed.
		{"192.31.196.0/24 (AS112-v4)", nil, []string{"192.31.196.1"}},
		{"192.52.193.0/24 (AMT)", nil, []string{"192.52.193.1"}},
		{"192.175.48.0/24 (AS112 direct delegation)", nil, []string{"192.175.48.1"}},

		// IPv6
		{"::/128", []string{"::"}, []string{"2001:4860:4860::8888"}},
		{"::1/128", []string{"::1"}, []string{"2001:4860:4860::8888"}},
		{"::ffff:0:0/96 (IPv4-mapped: as the IPv4 address)", []string{"::ffff:10.0.0.1", "::ffff:127.0.0.1", "::ffff:198.18.0.1", "::ffff:255.255.255.255"}, []string{"::ffff:8.8.8.8"}},
		{"::/96 (IPv4-compatible, deprecated)", []string{"::7f00:1", "::a00:1", "::808:808", "::ffff:ffff"}, []string{"2001:4860:4860::8888"}},
		{"64:ff9b::/96 (NAT64: as the IPv4 address)", []string{"64:ff9b::a00:1", "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b::c612:1", "64:ff9b::ffff:ffff", "64:ff9b::"}, []string{"64:ff9b::808:808", "64:ff9b::5db8:d822"}},
		{"64:ff9b:1::/48 (local-use NAT64)", []string{"64:ff9b:1::808:808", "64:ff9b:1:ffff::1"}, []string{"64:ff9b::808:808"}},
		{"100::/64", []string{"100::1", "100::ffff:ffff:ffff:ffff"}, []string{"2001:4860:4860::8888"}},
		{"2001::/23", []string{"2001::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001:1::1", "2001:2::1", "2001:3::1", "2001:20::1", "2001:1ff:ffff::1"}, []string{"2001:200::1"}},
		{"2001:db8::/32", []string{"2001:db8::1", "2001:db8:ffff::1"}, []string{"2001:db7:ffff::1", "2001:db9::1"}},
		{"2002::/16 (6to4)", []string{"2002:a00:1::1", "2002:7f00:1::1", "2002:808:808::1"}, []string{"2001:4860:4860::8888", "2003::1"}},
		{"3fff::/20", []string{"3fff::1", "3fff:fff:ffff::1"}, []string{"3ffe:ffff::1", "3fff:1000::1"}},
		{"5f00::/16", []string{"5f00::1"}, []string{"2001:4860:4860::8888"}},
		{"fc00::/7", []string{"fc00::1", "fd12:3456::1", "fdff:ffff::1"}, []string{"2001:4860:4860::8888"}},
		{"fe80::/10", []string{"fe80::1", "fe80::1%eth0", "febf::1"}, []string{"2001:4860:4860::8888"}},
		{"fec0::/10", []string{"fec0::1", "feff::1"}, []string{"2001:4860:4860::8888"}},
		{"ff00::/8", []string{"ff02::1", "ff0e::1"}, []string{"2001:4860:4860::8888"}},
		{"outside 2000::/3", []string{"1::1", "4000::1", "e000::1", "1fff:ffff::1"}, []string{"2000::1", "3fff:1000::1"}},
		{"2620:4f:8000::/48 (AS112 direct delegation)", nil, []string{"2620:4f:8000::1"}},
	}
	var strict dispatch.Guard
	for _, tt := range tests {
		t.Run(tt.block, func(t *testing.T) {
			t.Parallel()
			for _, a := range tt.inside {
				if err := strict.Check(netip.MustParseAddr(a)); !errors.Is(err, dispatch.ErrTargetRefused) {
					t.Errorf("Check(%s) = %v, want ErrTargetRefused", a, err)
				}
			}
			for _, a := range tt.outside {
				if err := strict.Check(netip.MustParseAddr(a)); err != nil {
					t.Errorf("Check(%s) = %v, want allowed", a, err)
				}
			}
		})
	}
}

// What each allowance opens, through an IPv6 form of an IPv4 address
// included: IPv4-mapped is the IPv4 address itself; a NAT64, 6to4 or
// IPv4-compatible form of a metadata address is never opened by
// AllowPrivate, nor one of a loopback address by allowing 127.0.0.1.
func TestGuardAllowancesAndEmbeddings(t *testing.T) {
	t.Parallel()
	private := dispatch.Guard{AllowPrivate: true}
	loopOnly := dispatch.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	tests := []struct {
		name  string
		guard dispatch.Guard
		addr  string
		want  bool // allowed
	}{
		{"private opens NAT64 of private", private, "64:ff9b::a00:1", true},
		{"private opens 6to4 of private", private, "2002:a00:1::1", true},
		{"private opens documentation", private, "192.0.2.1", true},
		{"private opens mapped loopback", private, "::ffff:127.0.0.1", true},
		{"private keeps mapped metadata", private, "::ffff:169.254.169.254", false},
		{"private keeps NAT64 of metadata", private, "64:ff9b::a9fe:a9fe", false},
		{"private keeps 6to4 of metadata", private, "2002:a9fe:a9fe::1", false},
		{"private keeps compatible metadata", private, "::a9fe:a9fe", false},
		{"private keeps ECS credentials", private, "169.254.170.2", false},
		{"private keeps EKS pod identity", private, "169.254.170.23", false},
		{"private keeps EKS pod identity v6", private, "fd00:ec2::23", false},
		{"private keeps Alibaba metadata", private, "100.100.100.200", false},
		{"private keeps NAT64 of Alibaba metadata", private, "64:ff9b::6464:64c8", false},
		{"private keeps local-use NAT64", private, "64:ff9b:1::a00:1", false},
		{"loopback allowance opens mapped", loopOnly, "::ffff:127.0.0.1", true},
		{"loopback allowance not NAT64", loopOnly, "64:ff9b::7f00:1", false},
		{"loopback allowance not 6to4", loopOnly, "2002:7f00:1::1", false},
		{"loopback allowance not compatible", loopOnly, "::7f00:1", false},
		{"loopback allowance not ::1", loopOnly, "::1", false},
		{"zoned link-local by prefix", dispatch.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("fe80::/10")}}, "fe80::1%eth0", true},
		{"NAT64 by explicit prefix", dispatch.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96")}}, "64:ff9b::a00:1", true},
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

// No IPv6 form of an IPv4 address gets through a guard that refuses the
// IPv4 address: NAT64 (well-known and local-use), 6to4, IPv4-compatible.
func FuzzGuardEmbeddedRefused(f *testing.F) {
	f.Add([]byte{127, 0, 0, 1}, false)
	f.Add([]byte{10, 0, 0, 1}, false)
	f.Add([]byte{169, 254, 169, 254}, true)
	f.Add([]byte{198, 18, 0, 1}, false)
	f.Add([]byte{8, 8, 8, 8}, true)
	f.Fuzz(func(t *testing.T, b []byte, allowPrivate bool) {
		if len(b) < 4 {
			return
		}
		v4 := netip.AddrFrom4([4]byte(b[:4]))
		g := dispatch.Guard{AllowPrivate: allowPrivate}
		if g.Check(v4) == nil {
			return
		}
		var nat, local, six, compat [16]byte
		copy(nat[:], []byte{0, 0x64, 0xff, 0x9b})
		copy(nat[12:], b[:4])
		copy(local[:], []byte{0, 0x64, 0xff, 0x9b, 0, 1})
		copy(local[6:], b[:4]) // one of RFC 6052's places for it
		copy(six[:], []byte{0x20, 0x02})
		copy(six[2:], b[:4])
		copy(compat[12:], b[:4])
		for _, a := range [][16]byte{nat, local, six, compat} {
			if err := g.Check(netip.AddrFrom16(a)); err == nil {
				t.Fatalf("Check(%s) = nil, but Check(%s) refuses", netip.AddrFrom16(a), v4)
			}
		}
	})
}
