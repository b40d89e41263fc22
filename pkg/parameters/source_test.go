package parameters

import (
	"errors"
	"testing"
)

func TestParseSource(t *testing.T) {
	tests := []struct {
		in   string
		want Source // Raw is filled in from in
		err  bool
	}{
		// 1. No "@": a YAML file path looked up with config.get.
		{in: "defaults.yaml", want: Source{Type: 'Y', Query: 'C', Delim: ":", Key: "defaults.yaml"}},
		{in: "", want: Source{Type: 'Y', Query: 'C', Delim: ":", Key: ""}},
		{in: "a:b", want: Source{Type: 'Y', Query: 'C', Delim: ":", Key: "a:b"}},
		// Key is after the first "@"; a second "@" and the rest are dropped.
		{in: "Y:G@os", want: Source{Type: 'Y', Option: "G", Query: 'G', Delim: ":", Key: "os"}},
		{in: "G@a@b", want: Source{Type: 'G', Option: "C", Query: 'G', Delim: ":", Key: "a"}},
		{in: "@", want: Source{Type: 'Y', Option: "C", Query: 'C', Delim: ":", Key: ""}},
		// 2. One part: option C, delimiter ":".
		{in: "C@tpl:lookup", want: Source{Type: 'C', Option: "C", Query: 'C', Delim: ":", Key: "tpl:lookup"}},
		{in: "I@tpl", want: Source{Type: 'I', Option: "C", Query: 'I', Delim: ":", Key: "tpl"}},
		{in: "Y@os", want: Source{Type: 'Y', Option: "C", Query: 'C', Delim: ":", Key: "os"}},
		// Two parts: type and option.
		{in: "C:SUB@tpl:lookup", want: Source{Type: 'C', Option: "SUB", Query: 'C', Delim: ":", Key: "tpl:lookup", Sub: true}},
		{in: "Y:I@roles", want: Source{Type: 'Y', Option: "I", Query: 'I', Delim: ":", Key: "roles"}},
		{in: "Y:@roles", want: Source{Type: 'Y', Option: "", Query: 'C', Delim: ":", Key: "roles"}},
		// Three parts: the delimiter, ":" when empty.
		{in: "Y:G:!@dns!domain", want: Source{Type: 'Y', Option: "G", Query: 'G', Delim: "!", Key: "dns!domain"}},
		{in: "Y:G:@a:b", want: Source{Type: 'Y', Option: "G", Query: 'G', Delim: ":", Key: "a:b"}},
		{in: "I:SUB:->@a->b", want: Source{Type: 'I', Option: "SUB", Query: 'I', Delim: "->", Key: "a->b", Sub: true}},
		// Four parts keep ":" (upstream ignores the third token then).
		{in: "Y:G:!:x@os", want: Source{Type: 'Y', Option: "G", Query: 'G', Delim: ":", Key: "os"}},
		// Five or more parts are an error.
		{in: "Y:G:!:x:y@os", err: true},
		{in: "::::@os", err: true},
		// 3. C/G/I ignore options other than SUB (case-sensitive).
		{in: "C:FOO@tpl", want: Source{Type: 'C', Option: "FOO", Query: 'C', Delim: ":", Key: "tpl"}},
		{in: "G:sub@os", want: Source{Type: 'G', Option: "sub", Query: 'G', Delim: ":", Key: "os"}},
		// Any other type letter, empty or lower case, is Y.
		{in: "X@sel", want: Source{Type: 'Y', Option: "C", Query: 'C', Delim: ":", Key: "sel"}},
		{in: "c@os", want: Source{Type: 'Y', Option: "C", Query: 'C', Delim: ":", Key: "os"}},
		{in: "@id", want: Source{Type: 'Y', Option: "C", Query: 'C', Delim: ":", Key: "id"}},
		{in: "yaml:G@os", want: Source{Type: 'Y', Option: "G", Query: 'G', Delim: ":", Key: "os"}},
		// A Y option that is no query method is an error, SUB included.
		{in: "Y:Z@os", err: true},
		{in: "Y:SUB@os", err: true},
		{in: "Y:g@os", err: true},
		{in: "X:CC@os", err: true},
		// 4. Nothing is trimmed.
		{in: " C@tpl", want: Source{Type: 'Y', Option: "C", Query: 'C', Delim: ":", Key: "tpl"}},
		{in: "C: SUB@tpl", want: Source{Type: 'C', Option: " SUB", Query: 'C', Delim: ":", Key: "tpl"}},
		{in: "Y: G@os", err: true},
		{in: "G@ os ", want: Source{Type: 'G', Option: "C", Query: 'G', Delim: ":", Key: " os "}},
		{in: "Y:G: @a b", want: Source{Type: 'Y', Option: "G", Query: 'G', Delim: " ", Key: "a b"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSource(tt.in)
			if tt.err {
				if err == nil {
					t.Fatalf("want an error, got %+v", got)
				}
				if !errors.Is(err, ErrBadSource) {
					t.Errorf("error %v does not wrap ErrBadSource", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Raw = tt.in
			if got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestSubKey(t *testing.T) {
	tests := []struct{ key, want string }{
		{"tpl:lookup", "tpl"},
		{"tpl", "tpl"},
		{"a:b:lookup", "a:b"},
		{"a!lookup", "a!lookup"},
		{"tpl:lookup:lookup", "tpl:lookup"},
		{"lookup", "lookup"},
		{":lookup", ""},
		// re's `$` also matches before a final newline.
		{"tpl:lookup\n", "tpl\n"},
		{"tpl:lookups", "tpl:lookups"},
	}
	for _, tt := range tests {
		if got := (Source{Key: tt.key}).subKey(); got != tt.want {
			t.Errorf("subKey(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}
