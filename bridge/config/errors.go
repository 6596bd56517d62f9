package config

import (
	"errors"
	"strconv"
	"strings"
)

// Issue is one finding about a configuration: where (file, line, column, the
// field's path such as writerGroups[1].writers[0].fields[3].node) and why.
// Line and Column are 0 when the setting is not in the file (a default, an
// environment variable: File then names the variable, "$UAGATE_HTTP_LISTEN").
// Messages never contain a secret's value.
type Issue struct {
	File         string
	Line, Column int
	Path         string
	Message      string
	// Err is the underlying error, if any (os.ErrNotExist for a missing
	// secret file …), for errors.Is; its text is already in Message.
	Err error
}

// String formats the issue as file:line:column: path: message, leaving out
// the parts that are unknown.
func (i Issue) String() string {
	var b strings.Builder
	if i.File != "" {
		b.WriteString(i.File)
		if i.Line > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(i.Line))
			if i.Column > 0 {
				b.WriteByte(':')
				b.WriteString(strconv.Itoa(i.Column))
			}
		}
		b.WriteString(": ")
	}
	if i.Path != "" {
		b.WriteString(i.Path)
		b.WriteString(": ")
	}
	b.WriteString(i.Message)
	return b.String()
}

// Warning is an Issue that does not stop the configuration from being used
// (an inline secret, an OPC Publisher key that is ignored …).
type Warning = Issue

// Error is every error found in a configuration, in file order for the
// decoding errors and then in field order for validation. Load, Parse and
// Validate return it as *Error.
type Error struct {
	Issues []Issue
}

// Error prints one issue per line.
func (e *Error) Error() string {
	lines := make([]string, len(e.Issues))
	for i, is := range e.Issues {
		lines[i] = is.String()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the issues' underlying errors, for errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	var errs []error
	for _, is := range e.Issues {
		if is.Err != nil {
			errs = append(errs, is.Err)
		}
	}
	return errs
}

// asError returns issues as an *Error, or nil when there are none.
func asError(issues []Issue) error {
	if len(issues) == 0 {
		return nil
	}
	return &Error{Issues: issues}
}

// Issues returns the issues of err when it is (or wraps) an *Error, else nil.
func Issues(err error) []Issue {
	var e *Error
	if errors.As(err, &e) {
		return e.Issues
	}
	return nil
}
