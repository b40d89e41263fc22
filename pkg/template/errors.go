package template

import "fmt"

// ErrKind classifies a rendering error the way Python's exception types
// did upstream, because each place swallows a different set of them.
type ErrKind uint8

// Error kinds, named for the Python exceptions they stand for.
const (
	KeyError ErrKind = iota + 1
	IndexError
	ValueError
	TypeError
	AttributeError
	// RecursionError is a list or dict field that carries a conversion or
	// format spec: upstream recurses forever on it.
	RecursionError
	// LimitError is our own bound on expansion size or nesting.
	LimitError
)

var kindNames = map[ErrKind]string{
	KeyError:       "missing key",
	IndexError:     "index out of range",
	ValueError:     "invalid pattern",
	TypeError:      "type error",
	AttributeError: "attribute access",
	RecursionError: "list or dict field with conversion or format spec",
	LimitError:     "limit exceeded",
}

// Error is one failure to expand or format a pattern.
type Error struct {
	Kind ErrKind
	Msg  string
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return kindNames[e.Kind]
	}
	return kindNames[e.Kind] + ": " + e.Msg
}

func errf(kind ErrKind, format string, args ...any) *Error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// PatternError names the pattern a fatal error came from.
type PatternError struct {
	Pattern string
	Err     *Error
}

func (e *PatternError) Error() string { return fmt.Sprintf("pattern %q: %v", e.Pattern, e.Err) }
func (e *PatternError) Unwrap() error { return e.Err }
