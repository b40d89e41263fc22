package parameters

import (
	"errors"
	"fmt"
	"strings"
)

// ErrBadSource reports a source string that cannot be parsed.
var ErrBadSource = errors.New("invalid source")

// Source is one parsed entry of the source notation `[TYPE[:OPTION[:DELIM]]@]KEY`.
type Source struct {
	// Type is 'C', 'G' or 'I' for value sources (config.get, grains.get,
	// pillar.get) and 'Y' for every other type letter: YAML files.
	Type byte
	// Option is the OPTION token as written: "" without an `@`, "C" when the
	// type stands alone (upstream's default), otherwise the second token.
	Option string
	// Query is the lookup method for KEY: the type itself for C/G/I, the
	// option (default C) for Y.
	Query byte
	// Delim splits KEY into path parts; never empty.
	Delim string
	// Key is everything after the first `@` (the whole string without one).
	Key string
	// Sub stores a C/G/I value under mapdata[Key minus ":lookup"].
	Sub bool
	// Raw is the source as written.
	Raw string
}

// ParseSource parses one source. Nothing is trimmed: whitespace belongs to
// the tokens, as in upstream's plain str.split.
func ParseSource(s string) (Source, error) {
	src := Source{Type: 'Y', Query: 'C', Delim: ":", Key: s, Raw: s}
	head, key, found := strings.Cut(s, "@")
	if !found {
		return src, nil
	}
	// Upstream takes split("@")[1]: a second "@" and what follows are dropped.
	key, _, _ = strings.Cut(key, "@")
	src.Key = key

	meta := strings.Split(head, ":")
	typ := meta[0]
	switch len(meta) {
	case 1:
		src.Option = "C"
	case 2, 4:
		// Four tokens keep the default delimiter, as upstream does.
		src.Option = meta[1]
	case 3:
		src.Option = meta[1]
		if meta[2] != "" {
			src.Delim = meta[2]
		}
	default:
		return Source{}, fmt.Errorf("%w %q: %d ':'-separated parts before '@', at most 4 allowed", ErrBadSource, s, len(meta))
	}

	switch typ {
	case "C", "G", "I":
		src.Type = typ[0]
		src.Query = typ[0]
		// Any option other than SUB is silently ignored upstream.
		src.Sub = src.Option == "SUB"
	default:
		switch src.Option {
		case "", "C", "G", "I":
			if src.Option != "" {
				src.Query = src.Option[0]
			}
		default:
			return Source{}, fmt.Errorf("%w %q: YAML query method %q is not one of C, G, I", ErrBadSource, s, src.Option)
		}
	}
	return src, nil
}

// subKey is the mapdata key a SUB source stores its value under: KEY minus
// one trailing ":lookup". Upstream uses re.sub(":lookup$", ...), whose `$`
// also matches before a final newline.
func (s Source) subKey() string {
	const suffix = ":lookup"
	if strings.HasSuffix(s.Key, suffix) {
		return s.Key[:len(s.Key)-len(suffix)]
	}
	if strings.HasSuffix(s.Key, suffix+"\n") {
		return s.Key[:len(s.Key)-len(suffix)-1] + "\n"
	}
	return s.Key
}
