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

// Cloud metadata endpoints. 169.254.169.254 is link-local and fd00:ec2::254
// unique-local anyway; they are named so that --allow-private-targets alone
// does not open them: reaching them needs an explicit --allow-target.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("fd00:ec2::254"),
}

// Ranges refused besides those netip.Addr classifies: "this network" and the
// carrier-grade NAT range, both of which reach inside a provider's network.
var extraBlocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
}

// Guard decides which resolved IP addresses outbound calls may connect to.
// By default only public unicast addresses are allowed: loopback, private,
// link-local, unique-local, cloud metadata, multicast and unspecified
// addresses are refused. AllowPrivate opens all of those but the cloud
// metadata addresses; Allow opens exactly the prefixes it lists, metadata
// included. The zero Guard is the strict default. A Guard is read-only once
// in use and safe for concurrent use.
type Guard struct {
	AllowPrivate bool
	Allow        []netip.Prefix
}

// Check returns nil if addr may be connected to, or an error wrapping
// ErrTargetRefused. IPv4-mapped IPv6 addresses are judged as the IPv4
// address they carry, so ::ffff:127.0.0.1 is loopback.
func (g *Guard) Check(addr netip.Addr) error {
	addr = addr.Unmap()
	for _, p := range g.Allow {
		if p.Contains(addr) {
			return nil
		}
	}
	reason := blockedReason(addr)
	if reason == "" || (g.AllowPrivate && reason != "cloud metadata") {
		return nil
	}
	return fmt.Errorf("%w: %s is %s", ErrTargetRefused, addr, reason)
}

func blockedReason(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "not an IP address"
	case isMetadata(a):
		return "cloud metadata"
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	case a.IsUnspecified():
		return "unspecified"
	}
	for _, p := range extraBlocked {
		if p.Contains(a) {
			return "reserved"
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
