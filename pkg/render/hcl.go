package render

import (
	"slices"
	"strconv"
	"strings"
)

// policyHCL writes a policy body in one canonical form, so that comparing
// the text is comparing the policy: rules in template order, capabilities
// sorted and unique, two-space indent, a newline at the end.
func policyHCL(rules []Rule, paths []string) string {
	var b strings.Builder
	for i, r := range rules {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("path ")
		b.WriteString(hclString(paths[i]))
		b.WriteString(" {\n")
		caps := slices.Clone(r.Capabilities)
		slices.Sort(caps)
		caps = slices.Compact(caps)
		writeList(&b, "capabilities", caps)
		if len(r.RequiredParameters) > 0 {
			writeList(&b, "required_parameters", r.RequiredParameters)
		}
		writeParams(&b, "allowed_parameters", r.AllowedParameters)
		writeParams(&b, "denied_parameters", r.DeniedParameters)
		if r.MinWrappingTTL != "" {
			b.WriteString("  min_wrapping_ttl = " + hclString(r.MinWrappingTTL) + "\n")
		}
		if r.MaxWrappingTTL != "" {
			b.WriteString("  max_wrapping_ttl = " + hclString(r.MaxWrappingTTL) + "\n")
		}
		b.WriteString("}\n")
	}
	return b.String()
}

func writeList(b *strings.Builder, key string, items []string) {
	b.WriteString("  " + key + " = [")
	for i, it := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(hclString(it))
	}
	b.WriteString("]\n")
}

func writeParams(b *strings.Builder, key string, params []ParameterValues) {
	if params == nil {
		return
	}
	b.WriteString("  " + key + " = {\n")
	for _, p := range params {
		b.WriteString("    " + hclString(p.Name) + " = [")
		for i, v := range p.Values {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(hclString(v))
		}
		b.WriteString("]\n")
	}
	b.WriteString("  }\n")
}

// hclString quotes s as an HCL string literal.
func hclString(s string) string {
	return strconv.Quote(s)
}
