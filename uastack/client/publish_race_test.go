//go:build race

package client

// raceEnabled tells allocation tests that the race detector is on.
const raceEnabled = true
