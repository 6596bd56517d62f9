//go:build race

package sink

// raceEnabled tells allocation tests that the race detector is on.
const raceEnabled = true
