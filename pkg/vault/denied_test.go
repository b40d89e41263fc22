package vault

import (
	"errors"
	"testing"
)

func TestDenied(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&Error{Op: "write auth/salt-minions/role/a", StatusCode: 403}, true},
		{&Error{Op: "read sys/auth", StatusCode: 401}, true},
		{&Error{Op: "login auth/approle/login", StatusCode: 400}, true}, // wrong secret ID
		{&Error{Op: "write identity/entity/name/a", StatusCode: 400}, false},
		{&Error{Op: "read sys/seal-status", StatusCode: 0}, false},
		{&Error{Op: "write x", StatusCode: 500}, false},
		{errors.New("plain"), false},
	}
	for _, tc := range tests {
		if got := Denied(tc.err); got != tc.want {
			t.Errorf("Denied(%v) = %v, want %v", tc.err, got, tc.want)
		}
		if Denied(tc.err) && Transient(tc.err) {
			t.Errorf("%v is both Denied and Transient", tc.err)
		}
	}
}
