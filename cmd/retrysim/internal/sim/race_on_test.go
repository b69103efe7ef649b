//go:build race

package sim_test

// raceEnabled: the race detector is on, and makes the 10,000-client runs
// ten times slower.
const raceEnabled = true
