package destination_test

import (
	"testing"

	"github.com/retrykit/retry/service/destination"
)

// attemptHeaders is on unless given false; a patch's null brings back the
// default, and a clone does not share the setting.
func TestAttemptHeadersSetting(t *testing.T) {
	t.Parallel()
	d, err := destination.ParseRequest([]byte(`{"destinationId":"d","url":"https://example.com","attemptHeaders":false}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Validate(destination.Bounds{}); err != nil {
		t.Fatal(err)
	}
	if d.SendsAttemptHeaders() {
		t.Fatal("attemptHeaders false, yet SendsAttemptHeaders")
	}
	c := d.Clone()
	*c.AttemptHeaders = true
	if d.SendsAttemptHeaders() || !c.SendsAttemptHeaders() {
		t.Fatal("a clone shares its attemptHeaders with the original")
	}
	p, err := destination.Patch(d, []byte(`{"attemptHeaders":null}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.AttemptHeaders != nil || !p.SendsAttemptHeaders() {
		t.Fatalf("after null, attemptHeaders = %v, want absent (on)", p.AttemptHeaders)
	}
	if !(&destination.Destination{}).SendsAttemptHeaders() {
		t.Fatal("a destination without attemptHeaders sends none")
	}
	if _, err := destination.ParseRequest([]byte(`{"destinationId":"d","url":"https://example.com","AttemptHeaders":false}`)); err == nil {
		t.Fatal("attemptHeaders spelled otherwise was accepted")
	}
}
