//go:build !race

package uasc

// raceEnabled tells allocation tests that the race detector is on.
const raceEnabled = false
