package api

import (
	"encoding/json"
	"maps"
	"testing"
)

// FuzzQuickObject holds parseObject's fast path to the strict one: whatever
// it accepts, the strict path accepts with the same members.
func FuzzQuickObject(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add(s)
	}
	for _, s := range []string{benchTask, `{"a":[1,"]",{"b":{"c":[]}}],"d":-1.5e3,"e":true,"f":null}`,
		`{"a":{"x":1},"b":{"x":2}}`, `{"a":{"x":1,"x":2}}`, `{"a":[{"x":1,"x":1}]}`, "{\"a\":\"\xff\"}",
		`{"a":"\"}"}`, `{"a":1}{}`, `{"a":1} `, ` {"a" : 1 , "b" : [ ] } `} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		quick, ok := quickObject([]byte(s))
		if !ok {
			return
		}
		strict, err := strictObject([]byte(s))
		if err != nil {
			t.Fatalf("%q: the fast path took what the strict one refuses: %v", s, err)
		}
		if !maps.EqualFunc(quick, strict, func(a, b json.RawMessage) bool { return string(a) == string(b) }) {
			t.Fatalf("%q: fast path %q, strict %q", s, quick, strict)
		}
	})
}

// The bodies clients send take the fast path, and what it refuses the
// strict path refuses too or reads alike.
func TestQuickObjectTakes(t *testing.T) {
	for _, s := range []string{benchTask, `{}`, ` {"a" : [1, {"b": "\u00e9\n"}] } `} {
		if _, ok := quickObject([]byte(s)); !ok {
			t.Errorf("%q: not taken by the fast path", s)
		}
	}
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"x":1,"x":2}}`, `{"a":[{"x":1,"x":1}]}`, `{"\u0061":1}`,
		`{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `[]`, `{"a":1} x`, `{"a":}`} {
		if _, ok := quickObject([]byte(s)); ok {
			t.Errorf("%q: taken by the fast path", s)
		}
	}
}
