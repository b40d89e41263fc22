package saltmaster

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/minionvault/minion-vault-operator/internal/saltext"
)

// VaultError is a Vault answer with an error status, classified the way
// saltext's client does it (client.py:734-756 _raise_status).
type VaultError struct {
	Method string
	Path   string // without the /v1/ prefix
	Status int
	// Errors is Vault's "errors" list; Decoded is false when the body was
	// not JSON (saltext then says "<Failed to decode response>").
	Errors  []string
	Decoded bool
	URL     string
}

// Class is the saltext exception this status raises.
func (e *VaultError) Class() string {
	switch e.Status {
	case 400:
		return "VaultInvocationError"
	case 403:
		return "VaultPermissionDeniedError"
	case 404:
		return "VaultNotFoundError"
	case 405:
		return "VaultUnsupportedOperationError"
	case 412:
		return "VaultPreconditionFailedError"
	case 429:
		return "VaultRateLimitExceededError"
	case 500, 502:
		return "VaultServerError"
	case 503:
		return "VaultUnavailableError"
	}
	// res.raise_for_status()
	return "HTTPError"
}

// Message is str() of that exception.
func (e *VaultError) Message() string {
	if e.Class() == "HTTPError" {
		kind := "Client"
		if e.Status >= 500 {
			kind = "Server"
		}
		return fmt.Sprintf("%d %s Error: %s for url: %s", e.Status, kind, http.StatusText(e.Status), e.URL)
	}
	if !e.Decoded {
		return "<Failed to decode response>"
	}
	return strings.Join(e.Errors, ", ")
}

func (e *VaultError) Error() string {
	return fmt.Sprintf("%s %s: Vault answered %d: %s", e.Method, e.Path, e.Status, e.Message())
}

// saltErr is saltext's exception class raised with a formatted message.
func saltErr(class, format string, args ...any) *saltext.SaltError {
	return &saltext.SaltError{Class: class, Msg: fmt.Sprintf(format, args...)}
}

// PythonError renders err as the runner does in its answers,
// f"{type(err).__name__}: {str(err)}" (runners/vault.py:214, 266, 371,
// 548, 551). The outermost VaultError or SaltError in the chain decides,
// as the exception saltext raised last does.
func PythonError(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch t := e.(type) {
		case *saltext.SaltError:
			return t.Class + ": " + t.Msg
		case *VaultError:
			return t.Class() + ": " + t.Message()
		case *RunnerAnswer:
			return t.Msg
		}
	}
	if err == nil {
		return ""
	}
	return "Exception: " + err.Error()
}

// HTTPStatus returns the Vault status behind err, 0 if there is none.
func HTTPStatus(err error) int {
	var ve *VaultError
	if errors.As(err, &ve) {
		return ve.Status
	}
	return 0
}

// pyClass is the class of the exception err stands for ("" if none).
func pyClass(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch t := e.(type) {
		case *saltext.SaltError:
			return t.Class
		case *VaultError:
			return t.Class()
		}
	}
	return ""
}

// isNotFound is `except VaultNotFoundError`: a 404 answer, or saltext's
// own VaultNotFoundError, unless something converted it on the way.
func isNotFound(err error) bool {
	return pyClass(err) == "VaultNotFoundError"
}
