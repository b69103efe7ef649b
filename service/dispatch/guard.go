package dispatch

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
)

// ErrTargetRefused is returned (wrapped) when the address a target resolves
// to is one the Guard does not allow. Such an attempt is not retried: the
// same name will most likely resolve to the same place again.
var ErrTargetRefused = errors.New("target address refused")

// Guard decides which resolved IP addresses outbound calls may connect to.
//
// By default only globally reachable unicast addresses are allowed: every
// block of the IANA IPv4 and IPv6 Special-Purpose Address Registries that
// the registry does not mark globally reachable is refused (loopback,
// private, shared, link-local, unique-local, documentation, benchmarking,
// reserved and the like; guard.go lists them and why), and so are multicast,
// broadcast, cloud metadata endpoints and IPv6 outside 2000::/3, the only
// space from which global unicast is assigned. An IPv6 address that carries
// an IPv4 one is judged by it: IPv4-mapped (::ffff:a.b.c.d) is that IPv4
// address, exactly, since a socket connects to it; NAT64 (64:ff9b::a.b.c.d)
// is allowed only when the IPv4 address is; 6to4 (2002::/16) and
// IPv4-compatible (::a.b.c.d) addresses are refused whatever they carry.
//
// AllowPrivate opens every refused address but those only an explicit Allow
// opens: the cloud metadata endpoints, any IPv6 form that carries one
// (64:ff9b::a9fe:a9fe), and local-use NAT64 (64:ff9b:1::/48), whose IPv4
// address cannot be read from it. Allow opens exactly the prefixes it lists,
// matched against the address as dialled (IPv4-mapped ones unmapped, zones
// dropped): allowing 127.0.0.1/32 opens ::ffff:127.0.0.1, which is the same
// socket address, but not 64:ff9b::7f00:1, which is a translator's. The
// zero Guard is the strict default. A Guard is read-only once in use and
// safe for concurrent use.
type Guard struct {
	AllowPrivate bool
	Allow        []netip.Prefix
}

// Check returns nil if addr may be connected to, or an error wrapping
// ErrTargetRefused.
func (g *Guard) Check(addr netip.Addr) error {
	// A zone (fe80::1%eth0) says which link, not which address; a prefix
	// never contains a zoned address, so it would slip past the tables.
	addr = addr.WithZone("").Unmap()
	for _, p := range g.Allow {
		if p.Contains(addr) {
			return nil
		}
	}
	v := judge(addr)
	if v.why == "" || (g.AllowPrivate && !v.explicitOnly) {
		return nil
	}
	return fmt.Errorf("%w: %s is %s", ErrTargetRefused, addr, v.why)
}

// verdict is why an address is refused ("" when it is not), and whether
// only an explicit Allow prefix opens it.
type verdict struct {
	why          string
	explicitOnly bool
}

// block is a refused range and why.
type block struct {
	p   netip.Prefix
	why string
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// v4Blocks are the IPv4 ranges refused, first match naming the reason. The
// IANA IPv4 Special-Purpose Address Registry marks each "Globally
// Reachable: False" unless noted:
//
//   - 0.0.0.0/8 is "this network": connecting to 0.0.0.0 reaches the
//     local host.
//   - 192.0.0.0/24 is refused whole. Its sub-blocks 192.0.0.9/32 (PCP
//     anycast) and 192.0.0.10/32 (TURN anycast) are marked globally
//     reachable, but they are protocol anycast addresses answered by the
//     nearest server, often the operator's own NAT gateway; no webhook
//     lives there, and --allow-target opens them if one ever does.
//   - 192.88.99.0/24 was the 6to4 relay anycast block, deprecated by RFC
//     7526 (the registry row is terminated); 192.88.99.2/32 (6a44 relay,
//     experimental) is refused with it.
//   - 224.0.0.0/4 (multicast) is in a registry of its own; TCP cannot use it.
//
// Allowed although listed in the registry, because it marks them globally
// reachable and they are ordinary routed prefixes: 192.31.196.0/24
// (AS112-v4), 192.52.193.0/24 (AMT) and 192.175.48.0/24 (AS112 direct
// delegation).
var v4Blocks = []block{
	{pfx("0.0.0.0/8"), `"this network"`},                               // RFC 791
	{pfx("10.0.0.0/8"), "private"},                                     // RFC 1918
	{pfx("100.64.0.0/10"), "shared address space (carrier-grade NAT)"}, // RFC 6598
	{pfx("127.0.0.0/8"), "loopback"},                                   // RFC 1122
	{pfx("169.254.0.0/16"), "link-local"},                              // RFC 3927
	{pfx("172.16.0.0/12"), "private"},                                  // RFC 1918
	{pfx("192.0.0.0/24"), "reserved for IETF protocol assignments"},    // RFC 6890
	{pfx("192.0.2.0/24"), "reserved for documentation"},                // RFC 5737
	{pfx("192.88.99.0/24"), "deprecated 6to4 relay anycast"},           // RFC 7526
	{pfx("192.168.0.0/16"), "private"},                                 // RFC 1918
	{pfx("198.18.0.0/15"), "reserved for benchmarking"},                // RFC 2544
	{pfx("198.51.100.0/24"), "reserved for documentation"},             // RFC 5737
	{pfx("203.0.113.0/24"), "reserved for documentation"},              // RFC 5737
	{pfx("224.0.0.0/4"), "multicast"},                                  // RFC 5771
	{pfx("255.255.255.255/32"), "limited broadcast"},                   // RFC 919
	{pfx("240.0.0.0/4"), "reserved"},                                   // RFC 1112
}

// v6Blocks are the IPv6 ranges refused, first match naming the reason,
// after the embedded IPv4 forms (see judge) and before the rule that
// refuses all of IPv6 outside 2000::/3. The IANA IPv6 Special-Purpose
// Address Registry marks each "Globally Reachable: False" unless noted:
//
//   - 2001::/23 is refused whole, Teredo (2001::/32, reachability N/A)
//     included. Its sub-blocks marked globally reachable are protocol
//     anycast addresses (PCP, TURN, DNS-SD SRP: 2001:1::1-3), AMT
//     (2001:3::/32), AS112 (2001:4:112::/48) and overlay identifiers
//     (ORCHIDv2 2001:20::/28, DETs 2001:30::/28) that are not locators;
//     none is a webhook, as for 192.0.0.0/24.
//   - fec0::/10 (site-local, deprecated by RFC 3879), ff00::/8 (multicast)
//     and the rest outside 2000::/3 are not in the registry but are not
//     global unicast (IANA IPv6 Address Space registry); they are named
//     here for a clearer reason than "reserved".
//
// Allowed: 64:ff9b::/96 (NAT64 well-known prefix, globally reachable) when
// the IPv4 address it carries is, and 2620:4f:8000::/48 (AS112 direct
// delegation, globally reachable), which is global unicast anyway.
var v6Blocks = []block{
	{pfx("::/128"), "unspecified"},                               // RFC 4291
	{pfx("::1/128"), "loopback"},                                 // RFC 4291
	{pfx("100::/64"), "discard-only"},                            // RFC 6666
	{pfx("2001::/32"), "Teredo"},                                 // RFC 4380
	{pfx("2001:2::/48"), "reserved for benchmarking"},            // RFC 5180
	{pfx("2001::/23"), "reserved for IETF protocol assignments"}, // RFC 2928
	{pfx("2001:db8::/32"), "reserved for documentation"},         // RFC 3849
	{pfx("3fff::/20"), "reserved for documentation"},             // RFC 9637
	{pfx("5f00::/16"), "an SRv6 segment identifier"},             // RFC 9602
	{pfx("fc00::/7"), "unique-local"},                            // RFC 4193
	{pfx("fe80::/10"), "link-local"},                             // RFC 4291
	{pfx("fec0::/10"), "site-local (deprecated)"},                // RFC 3879
	{pfx("ff00::/8"), "multicast"},                               // RFC 4291
}

// The IPv6 forms that carry an IPv4 address, but IPv4-mapped, which Check
// unmaps.
var (
	nat64      = pfx("64:ff9b::/96")   // RFC 6052 well-known prefix: the last 32 bits
	nat64Local = pfx("64:ff9b:1::/48") // RFC 8215 local use: where it sits depends on the site
	sixToFour  = pfx("2002::/16")      // RFC 3056: bits 16 to 47
	v4Compat   = pfx("::/96")          // RFC 4291 §2.5.5.1, deprecated: the last 32 bits
	globalV6   = pfx("2000::/3")
)

// Cloud metadata endpoints, refused unless an Allow prefix names them, even
// with AllowPrivate (which would otherwise open the link-local, unique-local
// and shared ranges they sit in): AWS, GCP, Azure, OCI and most others at
// 169.254.169.254, AWS's IPv6 one, the ECS task credentials endpoint, the
// EKS Pod Identity agent, and Alibaba Cloud's.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("169.254.170.2"),
	netip.MustParseAddr("169.254.170.23"),
	netip.MustParseAddr("fd00:ec2::23"),
	netip.MustParseAddr("100.100.100.200"),
}

// judge says why a, unmapped and without a zone, is refused.
func judge(a netip.Addr) verdict {
	switch {
	case !a.IsValid():
		return verdict{"not an IP address", true}
	case isMetadata(a):
		return verdict{"cloud metadata", true}
	case a.Is4():
		return verdict{why: find(v4Blocks, a)}
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return carrier("NAT64 of", netip.AddrFrom4([4]byte(b[12:])), "")
	case nat64Local.Contains(a):
		return verdict{"local-use NAT64, whose IPv4 address cannot be told", true}
	case sixToFour.Contains(a):
		return carrier("6to4 of", netip.AddrFrom4([4]byte(b[2:6])), "6to4 is not globally reachable")
	case v4Compat.Contains(a) && !a.IsUnspecified() && !a.IsLoopback():
		return carrier("IPv4-compatible form of", netip.AddrFrom4([4]byte(b[12:])), "deprecated")
	}
	if why := find(v6Blocks, a); why != "" {
		return verdict{why: why}
	}
	if !globalV6.Contains(a) {
		return verdict{why: "reserved (outside 2000::/3, the global unicast space)"}
	}
	return verdict{}
}

// carrier judges an IPv6 address that carries v4, described by form: it is
// refused if v4 is (and as firmly), or else if refused says why.
func carrier(form string, v4 netip.Addr, refused string) verdict {
	v := judge(v4)
	switch {
	case v.why != "":
		return verdict{form + " " + v4.String() + ", " + v.why, v.explicitOnly}
	case refused != "":
		return verdict{why: form + " " + v4.String() + " (" + refused + ")"}
	}
	return verdict{}
}

func find(blocks []block, a netip.Addr) string {
	for _, b := range blocks {
		if b.p.Contains(a) {
			return b.why
		}
	}
	return ""
}

func isMetadata(a netip.Addr) bool {
	for _, m := range metadataAddrs {
		if a == m {
			return true
		}
	}
	return false
}

// control is a net.Dialer Control function: it runs after name resolution,
// on the very address about to be connected to, so a name that resolves to
// a public address when checked and a private one when dialled (DNS
// rebinding) cannot get through.
func (g *Guard) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot parse %q: %v", ErrTargetRefused, address, err)
	}
	return g.Check(ap.Addr())
}
