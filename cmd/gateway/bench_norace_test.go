//go:build !race

package main

const benchRaceEnabled = false
