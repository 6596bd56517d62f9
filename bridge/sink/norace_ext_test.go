//go:build !race

package sink_test

const raceEnabled = false
