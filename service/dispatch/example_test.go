package dispatch_test

import (
	"fmt"
	"net/netip"

	"github.com/retrykit/retry/service/dispatch"
)

func ExampleGuard_Check() {
	g := dispatch.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}
	for _, a := range []string{"10.0.0.7", "10.0.1.7", "169.254.169.254", "8.8.8.8"} {
		fmt.Println(a, g.Check(netip.MustParseAddr(a)))
	}
	// Output:
	// 10.0.0.7 <nil>
	// 10.0.1.7 target address refused: 10.0.1.7 is private
	// 169.254.169.254 target address refused: 169.254.169.254 is cloud metadata
	// 8.8.8.8 <nil>
}
