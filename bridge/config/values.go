package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
)

// redacted stands for a secret's value wherever a Secret is printed.
const redacted = "[redacted]"

// Reveal returns the secret's value: the one Resolve found, or the inline
// Value. It is the only way to the value; call it where the value is used,
// never to log it.
func (s *Secret) Reveal() string {
	if s.ok {
		return s.resolved
	}
	return s.Value
}

// IsSet reports whether the secret is given at all.
func (s *Secret) IsSet() bool { return s.Value != "" || s.File != "" || s.Env != "" }

// Resolve reads the secret from its file (trailing newlines trimmed, as
// editors and `echo` add them) or environment variable, and keeps it for
// Reveal. An inline value needs no resolving. lookup is os.LookupEnv when nil.
// Errors name the file or variable, never the value.
func (s *Secret) Resolve(lookup func(string) (string, bool)) error {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	switch {
	case s.File != "":
		b, err := readLimited(s.File, maxSecretSize)
		if err != nil {
			return fmt.Errorf("secret file %s: %w", s.File, errors.Unwrap(err))
		}
		s.resolved, s.ok = strings.TrimRight(string(b), "\r\n"), true
	case s.Env != "":
		v, found := lookup(s.Env)
		if !found {
			return fmt.Errorf("secret environment variable %s is not set", s.Env)
		}
		s.resolved, s.ok = v, true
	default:
		s.resolved, s.ok = s.Value, true
	}
	return nil
}

// maxSecretSize bounds a secret file: a password or token, not a disk image.
const maxSecretSize = 64 << 10

// readLimited reads a file of at most limit bytes.
func readLimited(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: name, Err: err}
	}
	if int64(len(b)) > limit {
		return nil, &os.PathError{Op: "read", Path: name, Err: fmt.Errorf("larger than %d bytes", limit)}
	}
	return b, nil
}

// String describes where the secret comes from, without its value.
func (s Secret) String() string {
	switch {
	case s.File != "":
		return "file " + s.File
	case s.Env != "":
		return "env " + s.Env
	case s.Value != "":
		return redacted
	}
	return ""
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return "config.Secret{" + s.String() + "}" }

// LogValue keeps slog from printing the value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// secretOut is what a Secret marshals to: where it comes from, never the value.
type secretOut struct {
	Value string `yaml:"value,omitempty" json:"value,omitempty"`
	File  string `yaml:"file,omitempty" json:"file,omitempty"`
	Env   string `yaml:"env,omitempty" json:"env,omitempty"`
}

func (s Secret) out() any {
	switch {
	case s.File != "":
		return secretOut{File: s.File}
	case s.Env != "":
		return secretOut{Env: s.Env}
	case s.Value != "":
		return secretOut{Value: redacted}
	}
	return nil
}

// MarshalYAML writes where the secret comes from, with an inline value redacted.
func (s Secret) MarshalYAML() (any, error) { return s.out(), nil }

// MarshalJSON writes where the secret comes from, with an inline value redacted.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.out()) }

// String formats d as time.Duration does ("1.5s", "250ms").
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML writes the duration as a string ("1s").
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalJSON writes the duration as a string ("1s").
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON accepts a duration string or a number of milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := ParseDuration(s)
		if err != nil {
			return err
		}
		*d = v
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("duration %s: want a string such as \"1s\" or a number of milliseconds", b)
	}
	v, err := millis(f)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// ParseDuration parses a Go duration string ("1s", "250ms", "1m30s"), or a
// .NET TimeSpan string "[d.]hh:mm:ss[.fff]" as OPC Publisher writes them.
func ParseDuration(s string) (Duration, error) {
	if strings.Contains(s, ":") {
		return parseTimeSpan(s)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (want e.g. \"1s\", \"250ms\", or a number of milliseconds)", s)
	}
	return Duration(v), nil
}

// millis converts a number of milliseconds.
func millis(f float64) (Duration, error) {
	if f != f || f > float64(1<<62)/1e6 || f < -float64(1<<62)/1e6 {
		return 0, fmt.Errorf("%v milliseconds is out of range", f)
	}
	return Duration(f * float64(time.Millisecond)), nil
}

// parseTimeSpan parses "[-][d.]hh:mm:ss[.fffffff]".
func parseTimeSpan(s string) (Duration, error) {
	bad := fmt.Errorf("%q is not a TimeSpan (want [d.]hh:mm:ss[.fff])", s)
	rest, neg := strings.CutPrefix(s, "-")
	var days int64
	parts := strings.Split(rest, ":")
	if len(parts) != 3 {
		return 0, bad
	}
	if d, h, ok := strings.Cut(parts[0], "."); ok {
		v, err := strconv.ParseInt(d, 10, 32)
		if err != nil || v < 0 {
			return 0, bad
		}
		days, parts[0] = v, h
	}
	h, err1 := strconv.ParseInt(parts[0], 10, 32)
	m, err2 := strconv.ParseInt(parts[1], 10, 32)
	if err1 != nil || err2 != nil || h < 0 || h > 23 || m < 0 || m > 59 {
		return 0, bad
	}
	secs, err := strconv.ParseFloat(parts[2], 64)
	if err != nil || secs < 0 || secs >= 60 || strings.ContainsAny(parts[2], "eE+-") {
		return 0, bad
	}
	if days > 100000 {
		return 0, bad
	}
	d := time.Duration(days)*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(m)*time.Minute +
		time.Duration(secs*float64(time.Second))
	if neg {
		d = -d
	}
	return Duration(d), nil
}
