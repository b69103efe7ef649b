package signing_test

import (
	"fmt"
	"log"
	"time"

	"github.com/retrykit/retry/service/destination/signing"
)

// A sender signs each attempt; the receiver checks the headers it gets.
func Example() {
	secret, err := signing.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		log.Fatal(err)
	}
	body := []byte(`{"test": 2432232314}`)
	sent := time.Unix(1614265330, 0)

	h, err := signing.Headers([][]byte{secret}, "msg_p5jXN8AQM9LWM0D4loKWxJek", sent, body)
	if err != nil {
		log.Fatal(err)
	}
	for _, name := range []string{signing.HeaderID, signing.HeaderTimestamp, signing.HeaderSignature} {
		fmt.Printf("%s: %s\n", name, h.Get(name))
	}

	// The receiver, a minute later.
	err = signing.Verify([][]byte{secret}, h, body, sent.Add(time.Minute), 0)
	fmt.Println("verified:", err == nil)
	// Output:
	// webhook-id: msg_p5jXN8AQM9LWM0D4loKWxJek
	// webhook-timestamp: 1614265330
	// webhook-signature: v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
	// verified: true
}

// While a secret is rotated, each message carries a signature under the
// new secret and one under the old: receivers that hold either accept it.
func ExampleSign_rotation() {
	oldSecret, err := signing.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		log.Fatal(err)
	}
	newSecret := []byte("a new secret of at least 24 bytes")

	sig, err := signing.SignBytes([][]byte{newSecret, oldSecret}, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sig)
	// Output:
	// v1,Z7XbnpYT6yOTg+K1oWbPeepCEx3vwqIY3bwXKh9x0Js= v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
}
