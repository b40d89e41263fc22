package acl

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// An attribute set twice in one block is refused as Vault 1.21 and later
// refuse it (Vault 2.1 whatever the server's environment), with the path
// block and the attribute named; two blocks for one path are not
// attributes and stay accepted. With AllowDuplicateAttributes (Vault 1.20
// and earlier, OpenBao) the policy is accepted and decoded as Vault
// decodes it: lists joined, the last scalar kept.
func TestDuplicateAttributes(t *testing.T) {
	tests := []struct {
		name string
		text string
		// refused: the error's path block and attribute ("" when
		// accepted).
		path, attr string
		first, at  int
		// laxCaps: the first rule's capabilities when duplicates are
		// allowed.
		laxCaps []string
	}{
		{name: "capabilities twice",
			text: "path \"secret/data/web\" {\n  capabilities = [\"list\"]\n  capabilities = [\"read\"]\n}\n",
			path: "secret/data/web", attr: "capabilities", first: 2, at: 3, laxCaps: []string{"list", "read"}},
		{name: "policy twice, the last kept",
			text: "path \"a\" {\n  policy = \"write\"\n  policy = \"deny\"\n}\n",
			path: "a", attr: "policy", first: 2, at: 3, laxCaps: []string{"deny"}},
		{name: "a parameter twice",
			text: "path \"a\" {\n  capabilities = [\"update\"]\n  allowed_parameters = {\n    \"env\" = [\"dev\"]\n    \"env\" = [\"prod\"]\n  }\n}\n",
			path: "a", attr: "allowed_parameters.env", first: 4, at: 5, laxCaps: []string{"update"}},
		{name: "the second block's duplicate",
			text: "path \"a\" {\n  capabilities = [\"read\"]\n}\npath \"b\" {\n  capabilities = [\"read\"]\n  capabilities = [\"list\"]\n}\n",
			path: "b", attr: "capabilities", first: 5, at: 6, laxCaps: []string{"read"}},
		{name: "name twice at the top",
			text: "name = \"x\"\nname = \"y\"\npath \"a\" {\n  capabilities = [\"read\"]\n}\n",
			attr: "name", first: 1, at: 2, laxCaps: []string{"read"}},
		{name: "two blocks for one path are merged, not refused",
			text:    "path \"a\" {\n  capabilities = [\"read\"]\n}\npath \"a\" {\n  capabilities = [\"list\"]\n}\n",
			laxCaps: []string{"read"}},
		{name: "a quoted key is another key to the parser",
			text:    "path \"a\" {\n  capabilities = [\"read\"]\n  \"capabilities\" = [\"list\"]\n}\n",
			laxCaps: []string{"list", "read"}},
		{name: "JSON is not checked",
			text:    `{"path": {"a": {"capabilities": ["read"], "capabilities": ["list"]}}}`,
			laxCaps: []string{"list", "read"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("p", tt.text)
			if tt.attr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
			} else {
				var d *DuplicateAttributeError
				if !errors.As(err, &d) {
					t.Fatalf("err = %v, want a DuplicateAttributeError", err)
				}
				if d.Path != tt.path || d.Attribute != tt.attr || d.First != tt.first || d.Line != tt.at {
					t.Errorf("got %+v, want path %q attribute %q lines %d and %d", d, tt.path, tt.attr, tt.first, tt.at)
				}
				msg := err.Error()
				for _, want := range []string{`"` + tt.attr + `"`, "set twice", duplicateText} {
					if !strings.Contains(msg, want) {
						t.Errorf("message %q lacks %q", msg, want)
					}
				}
				if tt.path != "" && !strings.Contains(msg, `path "`+tt.path+`"`) {
					t.Errorf("message %q does not name the path", msg)
				}
				// The evaluator of Vault 1.21 and later refuses the set.
				if _, err := New(map[string]string{"p": tt.text}, Options{}); !errors.As(err, &d) {
					t.Errorf("New (1.21 mode) = %v", err)
				}
			}
			mode, _ := ModeForVersion("1.20.4")
			ev, err := New(map[string]string{"p": tt.text}, Options{Mode: mode})
			if err != nil {
				t.Fatalf("Vault 1.20 accepts it: %v", err)
			}
			if got := ev.Policy("p").Rules[0].Caps.Names(); !reflect.DeepEqual(got, tt.laxCaps) {
				t.Errorf("1.20 capabilities %q, want %q", got, tt.laxCaps)
			}
		})
	}
}

func TestModeDuplicateAttributes(t *testing.T) {
	for v, want := range map[string]bool{
		"1.15.6": true, "1.19.5": true, "1.20.4": true, "1.20.11": true,
		"1.21.0": false, "1.21.4": false, "2.0.0": false, "2.1.0": false,
	} {
		m, err := ModeForVersion(v)
		if err != nil {
			t.Fatal(err)
		}
		if m.AllowDuplicateAttributes != want {
			t.Errorf("%s: AllowDuplicateAttributes %v, want %v", v, m.AllowDuplicateAttributes, want)
		}
	}
	if (Mode{}).AllowDuplicateAttributes {
		t.Error("the zero mode (Vault 1.21.4) must refuse duplicates")
	}
}
