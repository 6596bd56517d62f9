//go:build race

package jsonenc

const raceEnabled = true
