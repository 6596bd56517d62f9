//go:build !race

package wssink

// raceEnabled tells allocation tests that the race detector is on.
const raceEnabled = false
