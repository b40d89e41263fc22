package template

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

type formatCase struct {
	v       value.Value
	spec    string
	want    string
	errKind ErrKind // 0: no error
	errMsg  string
}

// formatCases were produced by running format(v, spec) in CPython 3.11.7.
// OverflowError is expected as ValueError, and the lone surrogate that
// format(0xD800, 'c') makes as U+FFFD (see pyformat.go).
var formatCases = []formatCase{
	{value.NewFloat(12.0), "", "12.0", 0, ""},
	{value.NewFloat(1.0), "", "1.0", 0, ""},
	{value.NewFloat(1e+16), "", "1e+16", 0, ""},
	{value.NewFloat(1e-05), "", "1e-05", 0, ""},
	{value.NewFloat(0.1), "", "0.1", 0, ""},
	{value.NewFloat(math.Copysign(0, -1)), "", "-0.0", 0, ""},
	{value.NewFloat(math.Inf(1)), "", "inf", 0, ""},
	{value.NewFloat(math.Inf(-1)), "", "-inf", 0, ""},
	{value.NewFloat(math.NaN()), "", "nan", 0, ""},
	{value.NewBool(true), "", "True", 0, ""},
	{value.NewBool(false), "", "False", 0, ""},
	{value.NewNull(), "", "None", 0, ""},
	{value.NewInt(42), "", "42", 0, ""},
	{value.NewInt(-7), "", "-7", 0, ""},
	{value.NewString("héllo"), "", "héllo", 0, ""},
	{value.NewList([]value.Value{value.NewInt(1), value.NewString("a"), value.NewNull()}), "", "[1, 'a', None]", 0, ""},
	{value.NewMap([]value.Pair{{Key: value.NewString("a"), Val: value.NewInt(1)}, {Key: value.NewString("b"), Val: value.NewList([]value.Value{value.NewBool(true)})}}), "", "{'a': 1, 'b': [True]}", 0, ""},
	{value.NewList([]value.Value{}), "", "[]", 0, ""},
	{value.NewMap([]value.Pair{}), "", "{}", 0, ""},
	{value.NewInt(math.MinInt64), "", "-9223372036854775808", 0, ""},
	{value.NewString("ab"), "^7", "  ab   ", 0, ""},
	{value.NewString("ab"), "*<5.1", "a****", 0, ""},
	{value.NewString("ab"), ">5", "   ab", 0, ""},
	{value.NewString("ab"), "<5", "ab   ", 0, ""},
	{value.NewString("ab"), "^6", "  ab  ", 0, ""},
	{value.NewString("abc"), "^6", " abc  ", 0, ""},
	{value.NewString("ab"), "05", "ab000", 0, ""},
	{value.NewString("ab"), "5", "ab   ", 0, ""},
	{value.NewString("ab"), "s", "ab", 0, ""},
	{value.NewString("ab"), ".1s", "a", 0, ""},
	{value.NewString("ab"), ".0", "", 0, ""},
	{value.NewString("ab"), "1", "ab", 0, ""},
	{value.NewString("ab"), ".5", "ab", 0, ""},
	{value.NewString("héllo"), ".2", "hé", 0, ""},
	{value.NewString("héllo"), "~^9", "~~héllo~~", 0, ""},
	{value.NewString("ab"), "é>4", "ééab", 0, ""},
	{value.NewString("ab"), "😀^5", "😀ab😀😀", 0, ""},
	{value.NewString("日本語"), ">6", "   日本語", 0, ""},
	{value.NewString("日本語"), "x<5.2", "日本xxx", 0, ""},
	{value.NewString("ab"), "<<5", "ab<<<", 0, ""},
	{value.NewString("ab"), ">", "ab", 0, ""},
	{value.NewString("ab"), "^", "ab", 0, ""},
	{value.NewString("ab"), "<", "ab", 0, ""},
	{value.NewString("ab"), "0>4", "00ab", 0, ""},
	{value.NewString("ab"), "0^5", "0ab00", 0, ""},
	{value.NewString("ab"), "=<4", "ab==", 0, ""},
	{value.NewString("ab"), " ^6", "  ab  ", 0, ""},
	{value.NewString(""), ">3", "   ", 0, ""},
	{value.NewString(""), ".0", "", 0, ""},
	{value.NewString("ab"), "..", "", ValueError, "Format specifier missing precision"},
	{value.NewString("ab"), ".", "", ValueError, "Format specifier missing precision"},
	{value.NewString("a"), "+", "", ValueError, "Sign not allowed in string format specifier"},
	{value.NewString("a"), " ", "", ValueError, "Space not allowed in string format specifier"},
	{value.NewString("a"), "-", "", ValueError, "Sign not allowed in string format specifier"},
	{value.NewString("a"), "z", "", ValueError, "Negative zero coercion (z) not allowed in string format specifier"},
	{value.NewString("a"), "#", "", ValueError, "Alternate form (#) not allowed in string format specifier"},
	{value.NewString("a"), "=", "", ValueError, "'=' alignment not allowed in string format specifier"},
	{value.NewString("a"), "*=5", "", ValueError, "'=' alignment not allowed in string format specifier"},
	{value.NewString("a"), ",", "", ValueError, "Cannot specify ',' with 's'."},
	{value.NewString("a"), "_", "", ValueError, "Cannot specify '_' with 's'."},
	{value.NewString("a"), "d", "", ValueError, "Unknown format code 'd' for object of type 'str'"},
	{value.NewString("a"), "_x", "", ValueError, "Unknown format code 'x' for object of type 'str'"},
	{value.NewString("a"), ",x", "", ValueError, "Cannot specify ',' with 'x'."},
	{value.NewString("a"), "xx", "", ValueError, "Invalid format specifier 'xx' for object of type 'str'"},
	{value.NewString("a"), "é", "", ValueError, "Unknown format code '\\xe9' for object of type 'str'"},
	{value.NewString("a"), "\x00", "", ValueError, "Unknown format code '\\x0' for object of type 'str'"},
	{value.NewString("a"), "999999999999999999999999999999", "", ValueError, "Too many decimal digits in format string"},
	{value.NewString("ab"), ".999999999999999999999999999999", "", ValueError, "Too many decimal digits in format string"},
	{value.NewString("ab"), ".99999999999", "ab", 0, ""},
	{value.NewInt(1234567), ",", "1,234,567", 0, ""},
	{value.NewInt(1234567), "_", "1_234_567", 0, ""},
	{value.NewInt(255), "#_x", "0xff", 0, ""},
	{value.NewInt(255), "#x", "0xff", 0, ""},
	{value.NewInt(255), "#X", "0XFF", 0, ""},
	{value.NewInt(255), "X", "FF", 0, ""},
	{value.NewInt(255), "x", "ff", 0, ""},
	{value.NewInt(255), "o", "377", 0, ""},
	{value.NewInt(255), "#o", "0o377", 0, ""},
	{value.NewInt(255), "b", "11111111", 0, ""},
	{value.NewInt(255), "#b", "0b11111111", 0, ""},
	{value.NewInt(-255), "#_b", "-0b1111_1111", 0, ""},
	{value.NewInt(12345678), "_x", "bc_614e", 0, ""},
	{value.NewInt(12345678), "_o", "5706_0516", 0, ""},
	{value.NewInt(-12345678), "_X", "-BC_614E", 0, ""},
	{value.NewInt(42), "c", "*", 0, ""},
	{value.NewInt(128512), "c", "😀", 0, ""},
	{value.NewInt(65), ">5c", "    A", 0, ""},
	{value.NewInt(65), "=5c", "    A", 0, ""},
	{value.NewInt(65), "05c", "0000A", 0, ""},
	{value.NewInt(65), "*^5c", "**A**", 0, ""},
	{value.NewInt(5), "=+8", "+      5", 0, ""},
	{value.NewInt(5), "+", "+5", 0, ""},
	{value.NewInt(5), " ", " 5", 0, ""},
	{value.NewInt(-5), " ", "-5", 0, ""},
	{value.NewInt(-5), "+", "-5", 0, ""},
	{value.NewInt(5), "-", "5", 0, ""},
	{value.NewInt(42), "d", "42", 0, ""},
	{value.NewInt(42), "n", "42", 0, ""},
	{value.NewInt(1234567), "n", "1234567", 0, ""},
	{value.NewInt(42), "10", "        42", 0, ""},
	{value.NewInt(42), "<10", "42        ", 0, ""},
	{value.NewInt(42), "^10", "    42    ", 0, ""},
	{value.NewInt(42), "*^9", "***42****", 0, ""},
	{value.NewInt(-42), "=10", "-       42", 0, ""},
	{value.NewInt(-42), "010", "-000000042", 0, ""},
	{value.NewInt(-42), "<010", "-420000000", 0, ""},
	{value.NewInt(-42), "^010", "000-420000", 0, ""},
	{value.NewInt(-42), "x=10", "-xxxxxxx42", 0, ""},
	{value.NewInt(1234), "09,", "0,001,234", 0, ""},
	{value.NewInt(1234), "08,", "0,001,234", 0, ""},
	{value.NewInt(1234), "010_", "00_001_234", 0, ""},
	{value.NewInt(1000000), "0=+12,", "+001,000,000", 0, ""},
	{value.NewInt(255), "#012x", "0x00000000ff", 0, ""},
	{value.NewInt(255), "#012_b", "0b0_1111_1111", 0, ""},
	{value.NewInt(-255), "#015_b", "-0b00_1111_1111", 0, ""},
	{value.NewInt(1), "00", "1", 0, ""},
	{value.NewInt(1), "000", "1", 0, ""},
	{value.NewInt(7), "0<5", "70000", 0, ""},
	{value.NewInt(math.MinInt64), ",", "-9,223,372,036,854,775,808", 0, ""},
	{value.NewInt(math.MinInt64), "#x", "-0x8000000000000000", 0, ""},
	{value.NewInt(9223372036854775807), "_", "9_223_372_036_854_775_807", 0, ""},
	{value.NewInt(0), "#b", "0b0", 0, ""},
	{value.NewInt(0), "c", "\x00", 0, ""},
	{value.NewInt(1), "٥", "    1", 0, ""},
	{value.NewInt(1), ".2", "", ValueError, "Precision not allowed in integer format specifier"},
	{value.NewInt(1), ".2d", "", ValueError, "Precision not allowed in integer format specifier"},
	{value.NewInt(1), "z", "", ValueError, "Negative zero coercion (z) not allowed in integer format specifier"},
	{value.NewInt(65), "+c", "", ValueError, "Sign not allowed with integer format specifier 'c'"},
	{value.NewInt(65), " c", "", ValueError, "Sign not allowed with integer format specifier 'c'"},
	{value.NewInt(65), "#c", "", ValueError, "Alternate form (#) not allowed with integer format specifier 'c'"},
	{value.NewInt(65), ",c", "", ValueError, "Cannot specify ',' with 'c'."},
	{value.NewInt(65), ".1c", "", ValueError, "Precision not allowed in integer format specifier"},
	{value.NewInt(-1), "c", "", ValueError, "%c arg not in range(0x110000)"},
	{value.NewInt(1114112), "c", "", ValueError, "%c arg not in range(0x110000)"},
	{value.NewInt(55296), "c", "\uFFFD", 0, ""},
	{value.NewInt(1), ",_", "", ValueError, "Cannot specify both ',' and '_'."},
	{value.NewInt(1), "_,", "", ValueError, "Cannot specify both ',' and '_'."},
	{value.NewInt(1), ",,", "", ValueError, "Cannot specify ',' with ','."},
	{value.NewInt(1), ".", "", ValueError, "Format specifier missing precision"},
	{value.NewInt(1), "999999999999999999999999999999", "", ValueError, "Too many decimal digits in format string"},
	{value.NewInt(1), ",n", "", ValueError, "Cannot specify ',' with 'n'."},
	{value.NewInt(1), "_n", "", ValueError, "Cannot specify '_' with 'n'."},
	{value.NewInt(1), ",b", "", ValueError, "Cannot specify ',' with 'b'."},
	{value.NewInt(1), ",o", "", ValueError, "Cannot specify ',' with 'o'."},
	{value.NewInt(1), ",x", "", ValueError, "Cannot specify ',' with 'x'."},
	{value.NewInt(1), ",é", "", ValueError, "Cannot specify ',' with '\\xe9'."},
	{value.NewInt(1), "_ ", "", ValueError, "Cannot specify '_' with '\\x20'."},
	{value.NewInt(1), "\x00", "", ValueError, "Unknown format code '\\x0' for object of type 'int'"},
	{value.NewInt(1), "é", "", ValueError, "Unknown format code '\\xe9' for object of type 'int'"},
	{value.NewInt(1), " ", " 1", 0, ""},
	{value.NewInt(1), "q", "", ValueError, "Unknown format code 'q' for object of type 'int'"},
	{value.NewInt(1), "s", "", ValueError, "Unknown format code 's' for object of type 'int'"},
	{value.NewInt(1), "ab", "", ValueError, "Invalid format specifier 'ab' for object of type 'int'"},
	{value.NewInt(1), "abc", "", ValueError, "Invalid format specifier 'abc' for object of type 'int'"},
	{value.NewInt(1), "<<", "1", 0, ""},
	{value.NewInt(3), "e", "3.000000e+00", 0, ""},
	{value.NewInt(3), ".2f", "3.00", 0, ""},
	{value.NewInt(3), "%", "300.000000%", 0, ""},
	{value.NewInt(1000000000000000), "e", "1.000000e+15", 0, ""},
	{value.NewInt(-2), "G", "-2", 0, ""},
	{value.NewInt(12345), ",.1f", "12,345.0", 0, ""},
	{value.NewInt(9223372036854775807), ".0f", "9223372036854775808", 0, ""},
	{value.NewInt(7), "g", "7", 0, ""},
	{value.NewBool(true), ">5", "    1", 0, ""},
	{value.NewBool(true), "d", "1", 0, ""},
	{value.NewBool(false), "d", "0", 0, ""},
	{value.NewBool(true), "x", "1", 0, ""},
	{value.NewBool(true), "c", "\x01", 0, ""},
	{value.NewBool(true), ".1f", "1.0", 0, ""},
	{value.NewBool(true), "%", "100.000000%", 0, ""},
	{value.NewBool(true), "q", "", ValueError, "Unknown format code 'q' for object of type 'bool'"},
	{value.NewBool(true), "z", "", ValueError, "Negative zero coercion (z) not allowed in integer format specifier"},
	{value.NewBool(true), "s", "", ValueError, "Unknown format code 's' for object of type 'bool'"},
	{value.NewFloat(1.5), "08.3f", "0001.500", 0, ""},
	{value.NewFloat(math.Copysign(0, -1)), "z.1f", "0.0", 0, ""},
	{value.NewFloat(math.Copysign(0, -1)), ".1f", "-0.0", 0, ""},
	{value.NewFloat(math.Copysign(0, -1)), "z", "0.0", 0, ""},
	{value.NewFloat(math.Copysign(0, -1)), "z.0f", "0", 0, ""},
	{value.NewFloat(-0.0001), "z.2f", "0.00", 0, ""},
	{value.NewFloat(-0.0001), ".2f", "-0.00", 0, ""},
	{value.NewFloat(-0.0001), "z.2e", "-1.00e-04", 0, ""},
	{value.NewFloat(-0.0001), "z", "-0.0001", 0, ""},
	{value.NewFloat(1.2345e-05), "g", "1.2345e-05", 0, ""},
	{value.NewFloat(123456789.0), "e", "1.234568e+08", 0, ""},
	{value.NewFloat(1e+16), ".3", "1e+16", 0, ""},
	{value.NewFloat(12.0), "g", "12", 0, ""},
	{value.NewFloat(12.0), ".3", "12.0", 0, ""},
	{value.NewFloat(123.0), ".3", "1.23e+02", 0, ""},
	{value.NewFloat(1.5), "10", "       1.5", 0, ""},
	{value.NewFloat(1.5), "<10", "1.5       ", 0, ""},
	{value.NewFloat(1.5), "^10", "   1.5    ", 0, ""},
	{value.NewFloat(1.5), "=+10", "+      1.5", 0, ""},
	{value.NewFloat(1.5), "+", "+1.5", 0, ""},
	{value.NewFloat(1.5), " ", " 1.5", 0, ""},
	{value.NewFloat(-1.5), "010", "-0000001.5", 0, ""},
	{value.NewFloat(3.5), "%", "350.000000%", 0, ""},
	{value.NewFloat(0.25), ".1%", "25.0%", 0, ""},
	{value.NewFloat(0.0005), "%", "0.050000%", 0, ""},
	{value.NewFloat(math.Inf(1)), "F", "INF", 0, ""},
	{value.NewFloat(math.Inf(1)), "f", "inf", 0, ""},
	{value.NewFloat(math.Inf(-1)), "E", "-INF", 0, ""},
	{value.NewFloat(math.NaN()), "G", "NAN", 0, ""},
	{value.NewFloat(math.NaN()), "+", "+nan", 0, ""},
	{value.NewFloat(math.NaN()), "z", "nan", 0, ""},
	{value.NewFloat(math.Inf(-1)), "z", "-inf", 0, ""},
	{value.NewFloat(math.Inf(1)), "010", "0000000inf", 0, ""},
	{value.NewFloat(math.Inf(-1)), "=+10", "-      inf", 0, ""},
	{value.NewFloat(math.NaN()), "%", "nan%", 0, ""},
	{value.NewFloat(0.125), ".2f", "0.12", 0, ""},
	{value.NewFloat(0.375), ".2f", "0.38", 0, ""},
	{value.NewFloat(2.5), ".0f", "2", 0, ""},
	{value.NewFloat(3.5), ".0f", "4", 0, ""},
	{value.NewFloat(1.0), "#.0e", "1.e+00", 0, ""},
	{value.NewFloat(1.0), "#.0", "1.e+00", 0, ""},
	{value.NewFloat(1.0), "#", "1.0", 0, ""},
	{value.NewFloat(1e+16), "#", "1.e+16", 0, ""},
	{value.NewFloat(1.0), "#.0f", "1.", 0, ""},
	{value.NewFloat(1.0), "#g", "1.00000", 0, ""},
	{value.NewFloat(1.0), "#.3g", "1.00", 0, ""},
	{value.NewFloat(0.0), ".0", "0e+00", 0, ""},
	{value.NewFloat(0.0), "g", "0", 0, ""},
	{value.NewFloat(0.0), "e", "0.000000e+00", 0, ""},
	{value.NewFloat(1e+100), "e", "1.000000e+100", 0, ""},
	{value.NewFloat(1e-100), "E", "1.000000E-100", 0, ""},
	{value.NewFloat(1.5e+300), "f", "1500000000000000078757140382806630373056702871662238732373781173267703686983362293679557062620671796065556665749325817265413784853040645863467188277180060474272580801389863705606745350692182135089053429852456199917621678558451461320111979114170213741868888183230085264257173504208294580298189100810240.000000", 0, ""},
	{value.NewFloat(1e+22), ".25g", "10000000000000000000000", 0, ""},
	{value.NewFloat(1234567.0), ",", "1,234,567.0", 0, ""},
	{value.NewFloat(1234567.891), ",.2f", "1,234,567.89", 0, ""},
	{value.NewFloat(1234567.891), "_.3e", "1.235e+06", 0, ""},
	{value.NewFloat(1234567.0), "_g", "1.23457e+06", 0, ""},
	{value.NewFloat(1234.5), "012,.2f", "0,001,234.50", 0, ""},
	{value.NewFloat(1234.5), "011,.2f", "0,001,234.50", 0, ""},
	{value.NewFloat(1234.5), "0=15,", "0,000,001,234.5", 0, ""},
	{value.NewFloat(12345.678), "n", "12345.7", 0, ""},
	{value.NewFloat(0.1), ".17", "0.10000000000000001", 0, ""},
	{value.NewFloat(0.1), ".17g", "0.10000000000000001", 0, ""},
	{value.NewFloat(0.1), ".20f", "0.10000000000000000555", 0, ""},
	{value.NewFloat(0.3333333333333333), "", "0.3333333333333333", 0, ""},
	{value.NewFloat(0.3333333333333333), ".3", "0.333", 0, ""},
	{value.NewFloat(0.6666666666666666), ".0", "0.7", 0, ""},
	{value.NewFloat(1e-05), ".3", "1e-05", 0, ""},
	{value.NewFloat(0.0001), ".3", "0.0001", 0, ""},
	{value.NewFloat(0.0001), "g", "0.0001", 0, ""},
	{value.NewFloat(1e-05), "g", "1e-05", 0, ""},
	{value.NewFloat(123456.0), "g", "123456", 0, ""},
	{value.NewFloat(1234567.0), "g", "1.23457e+06", 0, ""},
	{value.NewFloat(1234567.0), "G", "1.23457E+06", 0, ""},
	{value.NewFloat(1.5e-10), "G", "1.5E-10", 0, ""},
	{value.NewFloat(9.99999), ".3g", "10", 0, ""},
	{value.NewFloat(9.9999), ".2e", "1.00e+01", 0, ""},
	{value.NewFloat(99.5), ".0f", "100", 0, ""},
	{value.NewFloat(5e-324), "", "5e-324", 0, ""},
	{value.NewFloat(5e-324), ".3e", "4.941e-324", 0, ""},
	{value.NewFloat(1.7976931348623157e+308), "", "1.7976931348623157e+308", 0, ""},
	{value.NewFloat(1.7976931348623157e+308), ".3g", "1.8e+308", 0, ""},
	{value.NewFloat(1.5), "x", "", ValueError, "Unknown format code 'x' for object of type 'float'"},
	{value.NewFloat(1.5), "c", "", ValueError, "Unknown format code 'c' for object of type 'float'"},
	{value.NewFloat(1.5), "d", "", ValueError, "Unknown format code 'd' for object of type 'float'"},
	{value.NewFloat(1.5), "z=", "1.5", 0, ""},
	{value.NewFloat(1.5), "\x00", "1.5", 0, ""},
	{value.NewFloat(1.5), ",n", "", ValueError, "Cannot specify ',' with 'n'."},
	{value.NewFloat(1.5), ".999999999999", "", ValueError, "precision too big"},
	{value.NewFloat(1.5), "_,", "", ValueError, "Cannot specify both ',' and '_'."},
	{value.NewFloat(1.5), "ab", "", ValueError, "Invalid format specifier 'ab' for object of type 'float'"},
	{value.NewFloat(100.0), "*^+12.1f", "***+100.0***", 0, ""},
	{value.NewFloat(-100.0), "*<12.1e", "-1.0e+02****", 0, ""},
	{value.NewFloat(1.5), "0<8", "1.500000", 0, ""},
	{value.NewFloat(1.5), "x=8", "xxxxx1.5", 0, ""},
	{value.NewFloat(1.0), ".0%", "100%", 0, ""},
	{value.NewFloat(1.0), "#.0%", "100.%", 0, ""},
	{value.NewNull(), "x", "", TypeError, "unsupported format string passed to NoneType.__format__"},
	{value.NewNull(), ">5", "", TypeError, "unsupported format string passed to NoneType.__format__"},
	{value.NewList([]value.Value{}), "x", "", TypeError, "unsupported format string passed to list.__format__"},
	{value.NewList([]value.Value{value.NewInt(1)}), "s", "", TypeError, "unsupported format string passed to list.__format__"},
	{value.NewMap([]value.Pair{}), "x", "", TypeError, "unsupported format string passed to dict.__format__"},
	{value.NewMap([]value.Pair{{Key: value.NewString("a"), Val: value.NewInt(1)}}), ">10", "", TypeError, "unsupported format string passed to dict.__format__"},
}

func checkFormat(t *testing.T, c formatCase) {
	t.Helper()
	prefix := []byte("pre|")
	got, err := appendFormat(prefix, c.v, c.spec)
	name := fmt.Sprintf("format(%s, %q)", c.v.PyRepr(), c.spec)
	if c.errKind == 0 {
		if err != nil {
			t.Errorf("%s: unexpected error %v, want %q", name, err, c.want)
			return
		}
		if string(got) != "pre|"+c.want {
			t.Errorf("%s = %q, want %q", name, strings.TrimPrefix(string(got), "pre|"), c.want)
		}
		return
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Errorf("%s = %q, %v; want %v error %q", name, got, err, c.errKind, c.errMsg)
		return
	}
	if e.Kind != c.errKind || e.Msg != c.errMsg {
		t.Errorf("%s: error %d %q, want %d %q", name, e.Kind, e.Msg, c.errKind, c.errMsg)
	}
	if string(got) != "pre|" {
		t.Errorf("%s: dst changed on error: %q", name, got)
	}
}

func TestAppendFormat(t *testing.T) {
	for _, c := range formatCases {
		checkFormat(t, c)
	}
}

// TestAppendFormatLimits covers our deliberate bound: Python builds any
// width or float precision, we refuse those above maxFormatWidth.
func TestAppendFormatLimits(t *testing.T) {
	big := strconv.Itoa(maxFormatWidth + 1)
	for _, c := range []formatCase{
		{value.NewString("ab"), big, "", LimitError, "format width 4097 is above the limit of 4096"},
		{value.NewString("ab"), "*^" + big, "", LimitError, "format width 4097 is above the limit of 4096"},
		{value.NewInt(1), big, "", LimitError, "format width 4097 is above the limit of 4096"},
		{value.NewInt(1), "0" + big + "_x", "", LimitError, "format width 4097 is above the limit of 4096"},
		{value.NewBool(true), big, "", LimitError, "format width 4097 is above the limit of 4096"},
		{value.NewFloat(1.5), big, "", LimitError, "format width 4097 is above the limit of 4096"},
		{value.NewFloat(1.5), "." + big + "f", "", LimitError, "format precision 4097 is above the limit of 4096"},
		{value.NewInt(1), "." + big + "e", "", LimitError, "format precision 4097 is above the limit of 4096"},
		// Python's own errors still win over the bound.
		{value.NewString("ab"), "+" + big, "", ValueError, "Sign not allowed in string format specifier"},
		{value.NewInt(1), big + ".1", "", ValueError, "Precision not allowed in integer format specifier"},
		{value.NewFloat(1.5), big + "d", "", ValueError, "Unknown format code 'd' for object of type 'float'"},
		{value.NewFloat(1.5), ".99999999999", "", ValueError, "precision too big"},
		// A string's precision only truncates, so it is not bounded.
		{value.NewString("ab"), "." + big, "ab", 0, ""},
		// At the bound.
		{value.NewString(""), "é>4096", strings.Repeat("é", 4096), 0, ""},
		{value.NewInt(5), "04096", strings.Repeat("0", 4095) + "5", 0, ""},
		{value.NewFloat(0.5), ".4096f", "0.5" + strings.Repeat("0", 4095), 0, ""},
	} {
		checkFormat(t, c)
	}
}

// TestAppendFormatInvalidUTF8 pins down what Python cannot express: invalid
// bytes in the value or spec count as one character each and pass through.
func TestAppendFormatInvalidUTF8(t *testing.T) {
	for _, c := range []formatCase{
		{value.NewString("a\xffb"), ">5", "  a\xffb", 0, ""},
		{value.NewString("a\xffb"), ".2", "a\xff", 0, ""},
		{value.NewString("ab"), "\xff^4", "\xffab\xff", 0, ""},
		{value.NewInt(1), "\xff", "", ValueError, "Unknown format code '\\xdcff' for object of type 'int'"},
		{value.NewInt(1), "\xff>3", "\xff\xff1", 0, ""},
	} {
		checkFormat(t, c)
	}
}

func FuzzAppendFormat(f *testing.F) {
	for _, c := range formatCases {
		f.Add(uint8(c.v.Kind()), c.v.Int(), c.v.Float(), c.v.Str(), c.spec)
	}
	for _, spec := range []string{"", "0", "00", "=", "\xff", "é", "😀^5", "\x00", ".0", ",", "_", "z", "#",
		"0=+#,.3%", "<0", "99999999999999999999", "4096", "\xff<4096", "-0x", ".4096f"} {
		f.Add(uint8(value.Float), int64(0), 1e300, "", spec)
		f.Add(uint8(value.Int), int64(math.MinInt64), 0.0, "", spec)
		f.Add(uint8(value.String), int64(0), 0.0, "日本\xff", spec)
	}
	f.Fuzz(func(t *testing.T, kind uint8, i int64, fl float64, s, spec string) {
		var v value.Value
		switch value.Kind(kind % 7) {
		case value.Null:
			v = value.NewNull()
		case value.Bool:
			v = value.NewBool(i&1 == 1)
		case value.Int:
			v = value.NewInt(i)
		case value.Float:
			v = value.NewFloat(fl)
		case value.String:
			v = value.NewString(s)
		case value.List:
			v = value.NewList([]value.Value{value.NewString(s)})
		default:
			v = value.NewMap([]value.Pair{{Key: value.NewString(s), Val: value.NewInt(i)}})
		}
		prefix := []byte("pre|")
		got, err := appendFormat(prefix, v, spec)
		if !bytes.HasPrefix(got, prefix) {
			t.Fatalf("format(%s, %q) = %q: lost dst", v.PyRepr(), spec, got)
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Msg == "" {
				t.Fatalf("format(%s, %q): error %#v is not a *Error with a message", v.PyRepr(), spec, err)
			}
			if len(got) != len(prefix) {
				t.Fatalf("format(%s, %q): dst changed on error: %q", v.PyRepr(), spec, got)
			}
			return
		}
		// The bound holds: at most the value, 4096 fill characters and a
		// float's 309 integer digits, 4096 decimals and some punctuation.
		if limit := len(prefix) + len(v.PyRepr()) + 4*maxFormatWidth + 6000; len(got) > limit {
			t.Fatalf("format(%s, %q): %d bytes", v.PyRepr(), spec, len(got))
		}
		if utf8.ValidString(spec) && utf8.ValidString(s) && !utf8.Valid(got) {
			t.Fatalf("format(%s, %q) = %q: invalid UTF-8", v.PyRepr(), spec, got)
		}
		again, _ := appendFormat(nil, v, spec)
		if !bytes.Equal(again, got[len(prefix):]) {
			t.Fatalf("format(%s, %q) not deterministic", v.PyRepr(), spec)
		}
	})
}

func BenchmarkAppendFormatEmptySpec(b *testing.B) {
	vals := []value.Value{value.NewString("some-minion-id"), value.NewInt(123456), value.NewFloat(1.5)}
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf, _ = appendFormat(buf[:0], vals[i%len(vals)], "")
	}
}

func BenchmarkAppendFormatWidth(b *testing.B) {
	vals := []value.Value{value.NewString("some-minion-id"), value.NewInt(123456), value.NewFloat(1.5)}
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf, _ = appendFormat(buf[:0], vals[i%len(vals)], ">20")
	}
}
