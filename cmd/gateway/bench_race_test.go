//go:build race

package main

const benchRaceEnabled = true
