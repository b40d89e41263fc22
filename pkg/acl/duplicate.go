package acl

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/hcl/ast"
	hclparser "github.com/hashicorp/hcl/hcl/parser"
)

// duplicateText is how the HCL parser Vault uses (github.com/hashicorp/hcl
// v1.0.1-vault-7, hcl/parser/parser.go objectList) refuses an attribute
// set twice; Vault 1.21 matches on it (helper/random/parser.go
// ParseAndCheckForDuplicateHclAttributes).
const duplicateText = "Each argument can only be defined once"

// DuplicateAttributeError is Vault's refusal of a policy that sets one
// attribute twice in one block: capabilities twice in one path block, one
// key twice in allowed_parameters, name twice at the top. Two path blocks
// with the same path are not that (blocks are not attributes): Vault
// merges them.
//
// Vault 1.20 accepts such a policy with a warning, Vault 1.21 and 2.0
// refuse it unless VAULT_ALLOW_PENDING_REMOVAL_DUPLICATE_HCL_ATTRIBUTES is
// set on the server, and Vault 2.1 refuses it always. OpenBao accepts it.
type DuplicateAttributeError struct {
	// Path is the key of the path block, "" for the top level.
	Path string
	// Attribute names the attribute, with its enclosing attributes
	// ("allowed_parameters.env").
	Attribute string
	// First and Line are the lines of the two settings.
	First, Line int
	// Vault is the parser's own message, as Vault answers it.
	Vault string
}

func (e *DuplicateAttributeError) Error() string {
	where := "at the top level"
	if e.Path != "" {
		where = fmt.Sprintf("path %q", e.Path)
	}
	msg := fmt.Sprintf("%s: attribute %q is set twice (lines %d and %d); Vault 1.21 and later refuse duplicate attributes", where, e.Attribute, e.First, e.Line)
	if e.Vault != "" {
		msg += " (" + e.Vault + ")"
	}
	return msg
}

// findDuplicate finds the attribute the strict parser refused, with its
// path block, by parsing again without the check and looking in the same
// order: an object list's items in turn, each item's value before its key,
// keys of assignments only (a block such as path "x" { } has none), keys
// compared as written (capabilities and "capabilities" differ).
func findDuplicate(text string) *DuplicateAttributeError {
	if isJSON(text) {
		return nil
	}
	f, err := hclparser.ParseDontErrorOnDuplicateKeys([]byte(text))
	if err != nil {
		return nil
	}
	list, ok := f.Node.(*ast.ObjectList)
	if !ok {
		return nil
	}
	return duplicateIn(list, "", nil)
}

func duplicateIn(list *ast.ObjectList, path string, outer []string) *DuplicateAttributeError {
	seen := map[string]int{}
	for _, item := range list.Items {
		inner := path
		if len(outer) == 0 && path == "" && len(item.Keys) > 1 {
			// path "x" { ... } at the top: the block's path.
			if k, ok := item.Keys[1].Token.Value().(string); ok {
				inner = k
			}
		}
		name := append(outer[:len(outer):len(outer)], keyName(item))
		if d := duplicateInValue(item.Val, inner, name); d != nil {
			return d
		}
		if !item.Assign.IsValid() {
			continue
		}
		for _, k := range item.Keys {
			if first, ok := seen[k.Token.Text]; ok {
				return &DuplicateAttributeError{Path: path, Attribute: strings.Join(name, "."), First: first, Line: k.Token.Pos.Line}
			}
			seen[k.Token.Text] = k.Token.Pos.Line
		}
	}
	return nil
}

func duplicateInValue(n ast.Node, path string, name []string) *DuplicateAttributeError {
	switch v := n.(type) {
	case *ast.ObjectType:
		if len(name) == 1 && name[0] == "path" {
			name = nil // a path block's attributes are named from the block
		}
		return duplicateIn(v.List, path, name)
	case *ast.ListType:
		for _, e := range v.List {
			if d := duplicateInValue(e, path, name); d != nil {
				return d
			}
		}
	}
	return nil
}

func keyName(item *ast.ObjectItem) string {
	if len(item.Keys) == 0 {
		return ""
	}
	if s, ok := item.Keys[0].Token.Value().(string); ok {
		return s
	}
	return item.Keys[0].Token.Text
}

// isJSON is the HCL library's lexMode: a document whose first non-space
// character is "{" is JSON, which the duplicate check does not cover.
func isJSON(text string) bool {
	for len(text) > 0 {
		r, w := utf8.DecodeRuneInString(text)
		if !unicode.IsSpace(r) {
			return r == '{'
		}
		text = text[w:]
	}
	return false
}
