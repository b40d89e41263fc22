//go:build oracle

package template

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// pythonFormatScript reads JSON lines [value, spec] and writes, for each,
// [true, result] or [false, exception type, message].
const pythonFormatScript = `
import sys, json
def decode(v):
    if isinstance(v, list):
        return [decode(x) for x in v]
    if isinstance(v, dict) and "f" in v:
        return float(v["f"])
    if isinstance(v, dict):
        return {decode(k): decode(x) for k, x in v["d"]}
    return v
for line in sys.stdin:
    v, spec = json.loads(line)
    v = decode(v)
    try:
        out = [True, format(v, spec)]
    except Exception as e:
        out = [False, type(e).__name__, str(e)]
    print(json.dumps(out))
`

func pythonValue(v value.Value) any {
	switch v.Kind() {
	case value.Null:
		return nil
	case value.Bool:
		return v.Bool()
	case value.Int:
		return v.Int()
	case value.Float:
		return map[string]string{"f": strconv.FormatFloat(v.Float(), 'g', -1, 64)}
	case value.String:
		return v.Str()
	case value.List:
		items := []any{}
		for _, it := range v.Items() {
			items = append(items, pythonValue(it))
		}
		return items
	}
	pairs := [][2]any{}
	for _, p := range v.Pairs() {
		pairs = append(pairs, [2]any{pythonValue(p.Key), pythonValue(p.Val)})
	}
	return map[string]any{"d": pairs}
}

// randomSpec makes a spec for a value of kind k: mostly one Python accepts
// for that kind, sometimes any combination of the grammar's parts, sometimes
// noise.
func randomSpec(r *rand.Rand, k value.Kind) string {
	pick := func(opts ...string) string { return opts[r.IntN(len(opts))] }
	if r.IntN(10) == 0 {
		const alphabet = "<>=^+- z#0123456789,_.bcdeEfFgGnosxX%é*q"
		a := []rune(alphabet)
		var b strings.Builder
		for n := r.IntN(7); n > 0; n-- {
			b.WriteRune(a[r.IntN(len(a))])
		}
		return b.String()
	}
	wild := r.IntN(3) == 0
	isStr := k == value.String && !wild
	var b strings.Builder
	align := pick("", "", "<", ">", "^", "=")
	if isStr && align == "=" {
		align = ""
	}
	if align != "" && r.IntN(2) == 0 {
		b.WriteString(pick("*", "0", "é", "😀", " ", "<", "=", "z", "#", "x", "1", "_"))
	}
	b.WriteString(align)
	if !isStr {
		b.WriteString(pick("", "", "+", "-", " "))
		if wild || k == value.Float {
			b.WriteString(pick("", "", "", "z"))
		}
		b.WriteString(pick("", "", "#"))
	}
	b.WriteString(pick("", "", "0"))
	switch r.IntN(6) {
	case 0, 1, 2:
		b.WriteString(strconv.Itoa(r.IntN(25)))
	case 3:
		b.WriteString(pick("٥", "１２", "00", "5000", "4096"))
	}
	var typ string
	switch {
	case wild:
		typ = pick("", "b", "c", "d", "e", "E", "f", "F", "g", "G", "n", "o", "s", "x", "X", "%",
			"q", "é", "\x00", " ", "ab", "z", ",")
	case isStr:
		typ = pick("", "s")
	case k == value.Int || k == value.Bool:
		typ = pick("", "b", "c", "d", "o", "x", "X", "n", "e", "E", "f", "F", "g", "G", "%")
	default:
		typ = pick("", "", "e", "E", "f", "F", "g", "G", "n", "%")
	}
	switch {
	case wild:
		b.WriteString(pick("", "", "", ",", "_", ",_", "_,", ",,"))
	case !isStr && typ != "n" && typ != "c":
		b.WriteString(pick("", "", "", ",", "_"))
	}
	intType := strings.Contains("bcdoxXn", typ) && (k == value.Int || k == value.Bool)
	if wild || !intType {
		switch r.IntN(5) {
		case 0, 1:
			b.WriteString("." + strconv.Itoa(r.IntN(22)))
		case 2:
			b.WriteString(pick(".", ".5000", ".٣", ".0"))
		}
	}
	b.WriteString(typ)
	return b.String()
}

func randomFormatValue(r *rand.Rand) value.Value {
	switch r.IntN(9) {
	case 0, 1:
		ints := []int64{0, 1, -1, 7, 42, 65, 255, -255, 1234567, -1234567, math.MinInt64, math.MaxInt64,
			0x1F600, 0x10FFFF, 0x110000, 1 << 53, 1<<53 + 1, 1e15}
		if r.IntN(2) == 0 {
			return value.NewInt(ints[r.IntN(len(ints))])
		}
		return value.NewInt(r.Int64N(1<<uint(r.IntN(62)+1)) - 1<<uint(r.IntN(20)))
	case 2, 3, 4:
		floats := []float64{0, math.Copysign(0, -1), 1, 1.5, -1.5, 0.1, 0.125, 2.5, 1e16, 1e-5, 1e-4, 1234567.891,
			-0.0001, 9.995, 5e-324, math.MaxFloat64, math.Inf(1), math.Inf(-1), math.NaN(), 1e22, 123456789.0, 0.5}
		if r.IntN(2) == 0 {
			return value.NewFloat(floats[r.IntN(len(floats))])
		}
		f := r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20))
		return value.NewFloat(f)
	case 5, 6:
		strs := []string{"", "a", "ab", "héllo", "日本語", "😀x", "abcdefghijklmnopqrstuvwxyz"}
		return value.NewString(strs[r.IntN(len(strs))])
	case 7:
		return value.NewBool(r.IntN(2) == 0)
	}
	switch r.IntN(3) {
	case 0:
		return value.NewNull()
	case 1:
		return value.NewList([]value.Value{value.NewInt(1), value.NewString("a")})
	}
	return value.NewMap([]value.Pair{{Key: value.NewString("a"), Val: value.NewFloat(1)}})
}

// TestFormatAgainstPython compares random specs and values with the python3
// on the machine, which must be CPython 3.11 (other versions word some
// errors differently). Run it with `make oracle`.
func TestFormatAgainstPython(t *testing.T) {
	ver, err := exec.Command("python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])").Output()
	if err != nil || strings.TrimSpace(string(ver)) != "3.11" {
		t.Fatalf("the oracle test needs CPython 3.11 as python3 (%q, %v)", ver, err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	type input struct {
		v    value.Value
		spec string
	}
	var inputs []input
	var stdin bytes.Buffer
	for range 30000 {
		v := randomFormatValue(r)
		in := input{v, randomSpec(r, v.Kind())}
		inputs = append(inputs, in)
		line, err := json.Marshal([]any{pythonValue(in.v), in.spec})
		if err != nil {
			t.Fatal(err)
		}
		stdin.Write(line)
		stdin.WriteByte('\n')
	}
	cmd := exec.Command("python3", "-c", pythonFormatScript)
	cmd.Stdin = &stdin
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(inputs) {
		t.Fatalf("python3 answered %d lines for %d inputs", len(lines), len(inputs))
	}
	kinds := map[string]ErrKind{"ValueError": ValueError, "TypeError": TypeError, "OverflowError": ValueError}
	failures, results, limited := 0, 0, 0
	for i, in := range inputs {
		var res []any
		if err := json.Unmarshal([]byte(lines[i]), &res); err != nil {
			t.Fatal(err)
		}
		got, err := appendFormat(nil, in.v, in.spec)
		var e *Error
		errors.As(err, &e)
		name := fmt.Sprintf("format(%s, %q)", in.v.PyRepr(), in.spec)
		switch {
		case res[0] == true && e != nil && e.Kind == LimitError:
			// Our deliberate bound.
			limited++
			continue
		case res[0] == true:
			results++
			if err != nil || string(got) != res[1].(string) {
				t.Errorf("%s = %q, %v; python %q", name, got, err, res[1])
				failures++
			}
		default:
			k, ok := kinds[res[1].(string)]
			if !ok || e == nil || e.Kind != k || e.Msg != res[2].(string) {
				t.Errorf("%s = %q, %v; python %s: %s", name, got, err, res[1], res[2])
				failures++
			}
		}
		if failures > 20 {
			t.Fatal("too many failures")
		}
	}
	t.Logf("%d cases: %d results, %d errors, %d over our bound", len(inputs), results, len(inputs)-results-limited, limited)
}
