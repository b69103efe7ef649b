package secrets_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/retrykit/retry/service/destination/secrets"
)

// A destination's secret is sealed before it is stored, bound to the field
// that holds it, and opened when an attempt needs it.
func Example() {
	dir, err := os.MkdirTemp("", "retryd")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// The first start creates the key file; later ones load it.
	kr, created, err := secrets.EnsureKeyFile(filepath.Join(dir, "retryd.key"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created:", created)

	field := []byte("acme/billing/headers.Authorization")
	token := kr.Seal([]byte("Bearer hunter2"), field)
	fmt.Println(strings.HasPrefix(token, "sec:v1:"+kr.KeyID()+":"), secrets.IsSealed(token))

	plain, err := kr.Open(token, field)
	fmt.Printf("%s %v\n", plain, err)

	// Copied into another field, the token does not open.
	_, err = kr.Open(token, []byte("acme/billing/headers.X-Api-Key"))
	fmt.Println(errors.Is(err, secrets.ErrCorrupt))

	// Reads show the mask, never the secret.
	fmt.Println(secrets.Mask)
	// Output:
	// created: true
	// true true
	// Bearer hunter2 <nil>
	// true
	// ••••
}

// After a rotation the keyring holds the new key and the old one: tokens
// sealed before still open, and Reseal moves them to the new key.
func ExampleKeyring_Reseal() {
	oldKey := make([]byte, secrets.KeySize) // from the old key file
	newKey := make([]byte, secrets.KeySize) // from the new one
	newKey[0] = 1

	before, err := secrets.NewKeyring(oldKey)
	if err != nil {
		log.Fatal(err)
	}
	field := []byte("acme/billing/signing.secret")
	token := before.Seal([]byte("whsec_..."), field)

	after, err := secrets.NewKeyring(newKey, oldKey)
	if err != nil {
		log.Fatal(err)
	}
	token, changed, err := after.Reseal(token, field)
	fmt.Println(changed, err)

	// The new key alone now opens it.
	only, err := secrets.NewKeyring(newKey)
	if err != nil {
		log.Fatal(err)
	}
	plain, err := only.Open(token, field)
	fmt.Printf("%s %v\n", plain, err)
	// Output:
	// true <nil>
	// whsec_... <nil>
}
