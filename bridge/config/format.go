package config

import (
	"bytes"
	"sync"
)

// Format reads configuration files written in a format other than the
// gateway's YAML. OPC Publisher's publishednodes.json is one: package
// bridge/config/publishednodes maps it onto this package's model (so this
// package cannot import it) and registers it here when it is imported, as
// image/png registers a decoder with package image. Load, Parse and Watch
// then read such files too; api imports it, so every gateway has it.
type Format struct {
	// Name is said in messages ("OPC Publisher's publishednodes.json").
	Name string
	// Detect reports whether data is in this format; it must be cheap.
	Detect func(data []byte) bool
	// Decode fills c (empty) from data and reports what it found: every
	// problem with its position in file, and where each part of c came
	// from, so that what validation finds later is reported at that line.
	Decode func(data []byte, file string, c *Config) Decoded
}

// Decoded is what a Format's Decode found.
type Decoded struct {
	Errors, Warnings []Issue
	// Origins maps a field path of the model ("endpoints[0]",
	// "writerGroups[1].writers[0].fields[2]") to the position in the file
	// it came from.
	Origins map[string]Position
}

// Position is a place in a file (1-based).
type Position struct{ Line, Column int }

// BOM is the UTF-8 byte order mark some editors (Windows ones) write at the
// start of a file; the loaders skip it.
const BOM = "\xef\xbb\xbf"

var formats struct {
	sync.RWMutex
	list []Format
}

// RegisterFormat makes Load and Parse read files of f's format (first
// registered, first asked). It is meant for a package's init.
func RegisterFormat(f Format) {
	formats.Lock()
	defer formats.Unlock()
	formats.list = append(formats.list, f)
}

// formatOf returns the registered format of data, if any.
func formatOf(data []byte) (Format, bool) {
	formats.RLock()
	defer formats.RUnlock()
	for _, f := range formats.list {
		if f.Detect(data) {
			return f, true
		}
	}
	return Format{}, false
}

// decodeFormat runs f on data into c, merging its findings into d's.
func (d *decoder) decodeFormat(f Format, data []byte, c *Config) {
	r := f.Decode(data, d.file, c)
	d.errs = append(d.errs, r.Errors...)
	d.warns = append(d.warns, r.Warnings...)
	for path, p := range r.Origins {
		d.pos[path] = origin{file: d.file, line: p.Line, column: p.Column}
	}
}

// unregisteredJSON tells a JSON array (OPC Publisher's format, most likely)
// read by a program that did not import its package, which the YAML decoder
// would only call "not a mapping".
func unregisteredJSON(data []byte) bool {
	formats.RLock()
	none := len(formats.list) == 0
	formats.RUnlock()
	s := bytes.TrimSpace(bytes.TrimPrefix(data, []byte(BOM)))
	return none && len(s) > 0 && s[0] == '['
}
