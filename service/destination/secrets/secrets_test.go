package secrets

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func randomKey(t testing.TB) []byte {
	t.Helper()
	k := make([]byte, KeySize)
	rand.Read(k)
	return k
}

func newRing(t testing.TB, current []byte, old ...[]byte) *Keyring {
	t.Helper()
	kr, err := NewKeyring(current, old...)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

var ad = []byte("acme/billing/headers.Authorization")

func TestRoundTrip(t *testing.T) {
	kr := newRing(t, randomKey(t))
	for _, plain := range []string{"", "s", "Bearer 0123456789abcdef", strings.Repeat("x", 10000)} {
		tok := kr.Seal([]byte(plain), ad)
		if !IsSealed(tok) {
			t.Fatalf("IsSealed(%q) = false", tok)
		}
		if want := "sec:v1:" + kr.KeyID() + ":"; !strings.HasPrefix(tok, want) {
			t.Fatalf("token %q does not begin with %q", tok, want)
		}
		if len(plain) > 8 && strings.Contains(tok, plain) {
			t.Fatalf("token %q holds the plaintext", tok)
		}
		got, err := kr.Open(tok, ad)
		if err != nil || string(got) != plain {
			t.Fatalf("Open = %q, %v; want %q", got, err, plain)
		}
	}
	// A fresh nonce each time: the same secret never seals to the same token.
	if a, b := kr.Seal([]byte("same"), ad), kr.Seal([]byte("same"), ad); a == b {
		t.Fatalf("two seals gave the same token %q", a)
	}
}

func TestKeyIDIsSHA256Prefix(t *testing.T) {
	// The id an operator computes with sha256sum (see the package doc).
	key := bytes.Repeat([]byte{1}, KeySize)
	const want = "72cd6e84" // sha256 of 32 bytes of 0x01, first 4 bytes
	if got := newRing(t, key).KeyID(); got != want {
		t.Fatalf("KeyID = %s, want %s", got, want)
	}
}

func TestTamperIsCorrupt(t *testing.T) {
	kr := newRing(t, randomKey(t))
	tok := kr.Seal([]byte("hunter2"), ad)
	head, body := tok[:len("sec:v1:12345678:")], tok[len("sec:v1:12345678:"):]
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw { // every byte: nonce, ciphertext and tag
		bad := bytes.Clone(raw)
		bad[i] ^= 0x01
		_, err := kr.Open(head+base64.RawURLEncoding.EncodeToString(bad), ad)
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: Open err = %v, want ErrCorrupt", i, err)
		}
	}
	for _, bad := range []string{
		"", "hunter2", "sec:v1:", tok[:len(tok)-1], tok + "A", head + "!!!!" + body[4:],
		head + body[:20], strings.Replace(tok, "sec:v1", "sec:v2", 1),
		strings.ToUpper(head[:len(head)-1]) + ":" + body,
	} {
		if _, err := kr.Open(bad, ad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Open(%q) err = %v, want ErrCorrupt", bad, err)
		}
	}
}

func TestWrongAdditionalData(t *testing.T) {
	kr := newRing(t, randomKey(t))
	tok := kr.Seal([]byte("hunter2"), ad)
	for _, other := range [][]byte{nil, []byte("acme/billing/headers.X-Api-Key"), []byte("evil/billing/headers.Authorization")} {
		if _, err := kr.Open(tok, other); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Open with ad %q: err = %v, want ErrCorrupt", other, err)
		}
	}
}

func TestUnknownKey(t *testing.T) {
	tok := newRing(t, randomKey(t)).Seal([]byte("hunter2"), ad)
	_, err := newRing(t, randomKey(t)).Open(tok, ad)
	if !errors.Is(err, ErrNoKey) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open with another key: err = %v, want ErrNoKey", err)
	}
}

func TestRotation(t *testing.T) {
	oldKey, newKeyB := randomKey(t), randomKey(t)
	before := newRing(t, oldKey)
	tok := before.Seal([]byte("hunter2"), ad)

	after := newRing(t, newKeyB, oldKey)
	if got, err := after.Open(tok, ad); err != nil || string(got) != "hunter2" {
		t.Fatalf("after rotation Open = %q, %v", got, err)
	}
	moved, changed, err := after.Reseal(tok, ad)
	if err != nil || !changed {
		t.Fatalf("Reseal = %q, %v, %v; want changed", moved, changed, err)
	}
	if !strings.HasPrefix(moved, "sec:v1:"+after.KeyID()+":") {
		t.Fatalf("resealed token %q is not under the current key %s", moved, after.KeyID())
	}
	// Once moved, the old key is no longer needed.
	if got, err := newRing(t, newKeyB).Open(moved, ad); err != nil || string(got) != "hunter2" {
		t.Fatalf("resealed token with the new key only: %q, %v", got, err)
	}
	// A token under the current key is left as it is.
	again, changed, err := after.Reseal(moved, ad)
	if err != nil || changed || again != moved {
		t.Fatalf("Reseal of a current token = %q, %v, %v; want it unchanged", again, changed, err)
	}
	// Reseal never launders a token that does not open.
	if _, _, err := after.Reseal(tok, []byte("other")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Reseal with the wrong ad: err = %v, want ErrCorrupt", err)
	}
}

func TestNewKeyring(t *testing.T) {
	k := randomKey(t)
	for _, bad := range [][]byte{nil, k[:16], append(bytes.Clone(k), 0)} {
		if _, err := NewKeyring(bad); !errors.Is(err, ErrBadKey) {
			t.Errorf("NewKeyring(%d bytes) err = %v, want ErrBadKey", len(bad), err)
		}
		if _, err := NewKeyring(k, bad); !errors.Is(err, ErrBadKey) {
			t.Errorf("old key of %d bytes: err = %v, want ErrBadKey", len(bad), err)
		}
	}
	// The current key listed among the old ones, or an old one twice.
	old := randomKey(t)
	kr := newRing(t, k, k, old, old)
	if len(kr.old) != 1 {
		t.Fatalf("keyring holds %d old keys, want 1", len(kr.old))
	}
}

func TestHMAC(t *testing.T) {
	k := randomKey(t)
	a, b := newRing(t, k), newRing(t, k)
	data := []byte(`{"url":"https://example.com","secret":"hunter2"}`)
	if !hmac.Equal(a.HMAC(data), b.HMAC(data)) {
		t.Fatal("one key, two digests")
	}
	h := a.NewHMAC()
	h.Write(data[:10])
	h.Write(data[10:])
	if !hmac.Equal(h.Sum(nil), a.HMAC(data)) {
		t.Fatal("NewHMAC in parts differs from HMAC")
	}
	if hmac.Equal(a.HMAC(data), a.HMAC(append(data, ' '))) {
		t.Fatal("two messages, one digest")
	}
	// Rotation changes the digest (documented on HMAC).
	if hmac.Equal(a.HMAC(data), newRing(t, randomKey(t), k).HMAC(data)) {
		t.Fatal("digest unchanged by rotation")
	}
}

func TestIsSealed(t *testing.T) {
	tok := newRing(t, randomKey(t)).Seal(nil, nil)
	for s, want := range map[string]bool{
		tok:                           true,
		"":                            false,
		"hunter2":                     false,
		"sec:v1:":                     false,
		Mask:                          false,
		tok[:len(tok)-1]:              false, // shorter than an empty plaintext's
		tok + "=":                     false,
		strings.ToUpper(tok):          false,
		"sec:v1:zzzzzzzz:" + tok[16:]: false,
	} {
		if got := IsSealed(s); got != want {
			t.Errorf("IsSealed(%q) = %v, want %v", s, got, want)
		}
	}
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadKeyFile(t *testing.T) {
	k := randomKey(t)
	enc := base64.StdEncoding.EncodeToString(k)
	for _, text := range []string{enc, enc + "\n", enc + "\r\n", "  " + enc + "\n\n"} {
		kr, err := LoadKeyFile(writeFile(t, "key", text))
		if err != nil {
			t.Fatalf("LoadKeyFile(%q): %v", text, err)
		}
		if kr.KeyID() != newRing(t, k).KeyID() {
			t.Fatalf("LoadKeyFile(%q) loaded another key", text)
		}
	}

	missing := filepath.Join(t.TempDir(), "nokey")
	if _, err := LoadKeyFile(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: err = %v, want fs.ErrNotExist naming the file", err)
	}
	for name, text := range map[string]string{
		"empty":     "",
		"notbase64": "not base64 at all!",
		"short":     base64.StdEncoding.EncodeToString(k[:31]),
		"long":      base64.StdEncoding.EncodeToString(append(k, 1)),
		"rawurl":    base64.RawURLEncoding.EncodeToString(k) + "-_",
		"huge":      strings.Repeat("A", 4096),
	} {
		p := writeFile(t, name, text)
		_, err := LoadKeyFile(p)
		if !errors.Is(err, ErrBadKey) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: err = %v, want ErrBadKey naming the file", name, err)
		}
	}

	// Old keys in further files open the tokens sealed with them.
	oldKey := randomKey(t)
	tok := newRing(t, oldKey).Seal([]byte("hunter2"), ad)
	kr, err := LoadKeyFile(writeFile(t, "new", enc), writeFile(t, "old", base64.StdEncoding.EncodeToString(oldKey)))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := kr.Open(tok, ad); err != nil || string(got) != "hunter2" {
		t.Fatalf("Open with the old key file: %q, %v", got, err)
	}
	if _, err := LoadKeyFile(writeFile(t, "new", enc), missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing old key file: err = %v", err)
	}
}

func TestEnsureKeyFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "retryd.key")
	kr, created, err := EnsureKeyFile(p)
	if err != nil || !created {
		t.Fatalf("EnsureKeyFile = %v, %v; want created", created, err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Fatalf("key file mode %v, want 0600", perm)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 45 || b[44] != '\n' { // as openssl rand -base64 32 writes it
		t.Fatalf("key file holds %q", b)
	}
	tok := kr.Seal([]byte("hunter2"), ad)

	again, created, err := EnsureKeyFile(p)
	if err != nil || created {
		t.Fatalf("second EnsureKeyFile = %v, %v; want it loaded", created, err)
	}
	if got, err := again.Open(tok, ad); err != nil || string(got) != "hunter2" {
		t.Fatalf("reloaded key does not open: %q, %v", got, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("directory holds %d files, want the key file alone", len(ents))
	}

	// A bad file is an error, never replaced by a new key.
	bad := writeFile(t, "bad", "nonsense")
	if _, _, err := EnsureKeyFile(bad); !errors.Is(err, ErrBadKey) {
		t.Fatalf("bad key file: err = %v, want ErrBadKey", err)
	}
	if _, _, err := EnsureKeyFile(filepath.Join(dir, "nodir", "key")); err == nil {
		t.Fatal("key file in a missing directory: no error")
	}
}

func TestEnsureKeyFileRace(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "retryd.key")
	const n = 16
	var (
		wg      sync.WaitGroup
		ids     [n]string
		created [n]bool
		errs    [n]error
	)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			kr, c, err := EnsureKeyFile(p)
			created[i], errs[i] = c, err
			if err == nil {
				ids[i] = kr.KeyID()
			}
		})
	}
	close(start)
	wg.Wait()
	creators := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("EnsureKeyFile %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("EnsureKeyFile %d loaded key %s, another %s", i, ids[i], ids[0])
		}
		if created[i] {
			creators++
		}
	}
	if creators != 1 {
		t.Fatalf("%d callers created the key file, want 1", creators)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("directory holds %d files, want the key file alone", len(ents))
	}
}

func FuzzOpen(f *testing.F) {
	key := bytes.Repeat([]byte{7}, KeySize)
	kr, err := NewKeyring(key)
	if err != nil {
		f.Fatal(err)
	}
	tok := kr.Seal([]byte("hunter2"), ad)
	for _, s := range []string{tok, "", "sec:v1:", "sec:v1:" + kr.KeyID() + ":", tok[:len(tok)-5], "sec:v1:00000000:AAAA"} {
		f.Add(s, ad)
	}
	f.Fuzz(func(t *testing.T, token string, ad []byte) {
		plain, err := kr.Open(token, ad)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNoKey) {
				t.Fatalf("Open(%q) err = %v, neither ErrCorrupt nor ErrNoKey", token, err)
			}
			return
		}
		if !IsSealed(token) {
			t.Fatalf("Open(%q) = %q, but IsSealed is false", token, plain)
		}
		// Whatever opens reseals and opens again to the same plaintext.
		again, err := kr.Open(kr.Seal(plain, ad), ad)
		if err != nil || !bytes.Equal(again, plain) {
			t.Fatalf("reseal of %q: %q, %v", token, again, err)
		}
	})
}

func TestOneTextPerToken(t *testing.T) {
	kr := newRing(t, randomKey(t))
	tok := kr.Seal([]byte("hunter2"), ad) // 7+28 bytes: 47 characters, the last with 2 unused bits
	last := strings.IndexByte(base64URL, tok[len(tok)-1])
	for i := 1; i < 4; i++ {
		alt := tok[:len(tok)-1] + string(base64URL[last^i])
		if _, err := kr.Open(alt, ad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("token altered in its unused bits opens: err = %v", err)
		}
	}
}

const base64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
