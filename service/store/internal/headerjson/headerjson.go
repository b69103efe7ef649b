// Package headerjson is how the SQL stores keep a task's request headers: as
// a JSON object of names to values, "{}" for none.
package headerjson

import (
	"encoding/json"
	"fmt"
)

// Encode returns h as the stores keep it: "{}" when h is empty.
func Encode(h map[string]string) (string, error) {
	if len(h) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("headers: %w", err)
	}
	return string(b), nil
}

// Decode reads what Encode wrote: nil for "{}" or nothing.
func Decode(s []byte) (map[string]string, error) {
	if len(s) == 0 || string(s) == "{}" {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal(s, &h); err != nil {
		return nil, fmt.Errorf("headers: %w", err)
	}
	return h, nil
}
