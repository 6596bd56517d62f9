//go:build !race

package ua

// genRaceEnabled tells allocation tests that the race detector is on.
const genRaceEnabled = false
