package saltext

import "fmt"

// SaltError is an exception saltext or Python raises itself (not an HTTP
// status): SaltRunnerError, VaultException, KeyError, TypeError, ...
type SaltError struct {
	Class string
	Msg   string
	Err   error // the cause, if any
}

func (e *SaltError) Error() string {
	if e.Msg == "" {
		return e.Class
	}
	return e.Class + ": " + e.Msg
}

func (e *SaltError) Unwrap() error { return e.Err }

func saltErr(class, format string, args ...any) *SaltError {
	return &SaltError{Class: class, Msg: fmt.Sprintf(format, args...)}
}
