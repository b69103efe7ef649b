// These tests are in package main, the one place Go allows no external test
// package: they call run, the whole command, with real arguments and check
// what it prints and draws.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func runArgs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// quick holds each experiment's arguments, sized to run in a blink.
var quick = map[string][]string{
	"occ":           {"occ", "--clients", "5,20", "--runs", "3"},
	"outage":        {"outage", "--clients", "200", "--outage", "2s", "--capacity", "50"},
	"amplification": {"amplification", "--requests", "500"},
}

func TestRunTables(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		want []string
	}{
		{"occ", []string{"Writes received by the server", "Completion time", "clients", "none", "exponential", "equal", "full", "decorrelated"}},
		{"outage", []string{"200 clients, 2s outage, then 50 requests/s", "calls/client", "peak req/s after outage", "decorrelated"}},
		{"amplification", []string{"3 layers × 3 attempts", "quota 100/1/0.1", "none", "100%"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runArgs(t, quick[tt.name]...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("table lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// jsonRows decodes one JSON object per line.
func jsonRows(t *testing.T, out string) []map[string]any {
	t.Helper()
	var rows []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		rows = append(rows, row)
	}
	return rows
}

func TestRunOCCJSON(t *testing.T) {
	t.Parallel()
	code, out, errOut := runArgs(t, slices.Concat(quick["occ"], []string{"--json"})...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	rows := jsonRows(t, out)
	if got, want := len(rows), 10*2; got != want {
		t.Fatalf("got %d rows, want %d (10 strategies × 2 client counts)", got, want)
	}
	// The post's numbering, as the engine's parameters: exponential waits
	// start at base·2 = 10 ms, decorrelated grows from base = 5 ms.
	wantBase := map[string]float64{"none": 0, "exponential": 10, "equal": 10, "full": 10, "decorrelated": 5,
		"full+quota": 10, "aws-adaptive": 10, "client-limiter": 10, "shared-limiter": 10, "shared-cubic": 10}
	for _, r := range rows {
		name, _ := r["strategy"].(string)
		b, _ := r["backoff"].(map[string]any)
		if got := b["initialDelayMs"]; got != wantBase[name] {
			t.Errorf("%s: initialDelayMs %v, want %v", name, got, wantBase[name])
		}
		if name != "none" && b["maxDelayMs"] != 2000.0 {
			t.Errorf("%s: maxDelayMs %v, want 2000", name, b["maxDelayMs"])
		}
		if calls, _ := r["calls"].(float64); calls+r["gaveUp"].(float64) < r["clients"].(float64) {
			t.Errorf("%s: %v writes for %v clients", name, calls, r["clients"])
		}
		if r["completionMs"].(float64) <= 0 || r["runs"] != 3.0 || r["seed"] != 1.0 {
			t.Errorf("%s: row %v", name, r)
		}
	}
}

func TestRunOutageAndAmplificationJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		rows   int
		fields []string
	}{
		{"outage", 10, []string{"strategy", "backoff", "clients", "outageMs", "capacityRps", "callsPerClient", "gaveUp", "peakRps", "peakOverCapacity", "completionMs", "loadRps"}},
		{"amplification", 8, []string{"layers", "attempts", "failureRate", "quota", "requests", "bottomCallsPerRequest", "successRate"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runArgs(t, slices.Concat(quick[tt.name], []string{"--json"})...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			rows := jsonRows(t, out)
			if len(rows) != tt.rows {
				t.Fatalf("got %d rows, want %d", len(rows), tt.rows)
			}
			for _, r := range rows {
				if r["experiment"] != tt.name {
					t.Errorf("experiment %v, want %s", r["experiment"], tt.name)
				}
				for _, f := range tt.fields {
					if _, ok := r[f]; !ok {
						t.Errorf("row lacks %q: %v", f, r)
					}
				}
			}
		})
	}
}

func TestRunSameSeedSameOutput(t *testing.T) {
	t.Parallel()
	for name, args := range quick {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, first, _ := runArgs(t, slices.Concat(args, []string{"--json", "--seed", "11"})...)
			_, second, _ := runArgs(t, slices.Concat(args, []string{"--json", "--seed", "11"})...)
			if first != second {
				t.Errorf("seed 11 twice gave different output:\n%s\n%s", first, second)
			}
			_, other, _ := runArgs(t, slices.Concat(args, []string{"--json", "--seed", "12"})...)
			if other == first {
				t.Error("seeds 11 and 12 gave the same output")
			}
		})
	}
}

func TestRunPlots(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, args := range quick {
		for _, ext := range []string{".png", ".svg"} {
			t.Run(name+ext, func(t *testing.T) {
				t.Parallel()
				path := filepath.Join(dir, name+ext)
				if code, _, errOut := runArgs(t, slices.Concat(args, []string{"--plot", path})...); code != 0 {
					t.Fatalf("exit %d: %s", code, errOut)
				}
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if ext == ".svg" {
					if !bytes.Contains(data, []byte("<svg")) {
						t.Errorf("%s is not SVG: %.60q", path, data)
					}
					return
				}
				img, err := png.Decode(bytes.NewReader(data))
				if err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 400 {
					t.Errorf("%s is %v, too small to read", path, b)
				}
			})
		}
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"no experiment", nil, 2, "usage: retrysim"},
		{"unknown experiment", []string{"herd"}, 2, `unknown experiment "herd"`},
		{"unknown flag", []string{"occ", "--clinets", "5"}, 2, "flag provided but not defined"},
		{"bad client list", []string{"occ", "--clients", "5,x"}, 2, `"x" is not a whole number`},
		{"zero clients", []string{"occ", "--clients", "0"}, 2, "not a whole number of at least 1"},
		{"stray argument", []string{"occ", "extra"}, 2, `unexpected argument "extra"`},
		{"unknown strategy", []string{"occ", "--clients", "2", "--runs", "1", "--strategies", "full,fibonacci"}, 1, `unknown strategy "fibonacci"`},
		{"cap below base", []string{"outage", "--base", "1s", "--cap", "10ms"}, 1, "base ≤ cap"},
		{"rate above 1", []string{"amplification", "--failure-rates", "0.5,2"}, 2, "not a rate within [0, 1]"},
		{"no capacity", []string{"outage", "--clients", "10", "--capacity", "0"}, 1, "capacity must be at least 1"},
		{"bad plot file", []string{"amplification", "--requests", "10", "--plot", "chart.gif"}, 1, "want a .png or .svg file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, _, errOut := runArgs(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d", code, tt.wantCode)
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr %q lacks %q", errOut, tt.wantErr)
			}
		})
	}
}

func TestRunHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help"}, {"occ", "-h"}, {"outage", "--help"}, {"amplification", "-h"}} {
		code, out, errOut := runArgs(t, args...)
		if code != 0 || !strings.Contains(out+errOut, "usage: retrysim") {
			t.Errorf("%v: exit %d, output %q", args, code, out+errOut)
		}
	}
}

func FuzzIntList(f *testing.F) {
	for _, s := range []string{"10,20,30", "5", "", "0", "-1", "1,,2", " 7 , 8 ", "1e3", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var got []int
		if intList(&got).Set(s) != nil {
			return
		}
		for _, n := range got {
			if n < 1 {
				t.Fatalf("%q gave %v, with a count below 1", s, got)
			}
		}
		var again []int
		if err := intList(&again).Set(intList(&got).String()); err != nil || !slices.Equal(again, got) {
			t.Errorf("%q gave %v, which prints as a list that reads back as %v (%v)", s, got, again, err)
		}
	})
}

func FuzzFloatList(f *testing.F) {
	for _, s := range []string{"0.01,0.1,0.5,1", "0", "1.5", "NaN", "-0", ",", "1e-300", "Inf"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var got []float64
		if floatList(&got).Set(s) != nil {
			return
		}
		for _, r := range got {
			if !(r >= 0 && r <= 1) {
				t.Fatalf("%q gave %v, with a rate outside [0, 1]", s, got)
			}
		}
	})
}
