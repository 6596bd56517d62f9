//go:build !race

package jsonenc

const raceEnabled = false
