package params

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Type is the type of a parameter's value.
type Type uint8

// The parameter types. The zero Type is invalid, so that a Def that forgets
// its type is caught at registration.
const (
	Bool   Type = iota + 1 // 1/0, true/false, yes/no, on/off, enabled/disabled, any case
	Int                    // signed 64-bit, decimal or 0x hex
	Uint                   // unsigned 64-bit, decimal or 0x hex
	Size                   // unsigned byte count; k, m, g suffixes are binary multiples
	String                 // any text, kept verbatim
	Enum                   // one of Def.Values, by name (any case) or by number
	List                   // comma-separated items; restricted to Def.Values names when given
)

var typeNames = [...]string{Bool: "bool", Int: "int", Uint: "uint", Size: "size", String: "string", Enum: "enum", List: "list"}

// String returns the name printed by ompi_info in its type field.
func (t Type) String() string {
	if t >= Bool && t <= List {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// Scope says how a parameter's value may differ between processes and
// whether a user may set it at all.
type Scope uint8

const (
	// ScopeLocal values may differ from process to process (the default).
	ScopeLocal Scope = iota
	// ScopeAllEq values must be the same in every process of a job
	// (framework selections). Nothing enforces it; it is documentation that
	// ompi_info shows.
	ScopeAllEq
	// ScopeConstant values are informational: they are computed by gompi and a
	// user cannot set them. Setting one is an error.
	ScopeConstant
)

var scopeNames = [...]string{ScopeLocal: "local", ScopeAllEq: "all-eq", ScopeConstant: "constant"}

func (s Scope) String() string {
	if int(s) < len(scopeNames) {
		return scopeNames[s]
	}
	return fmt.Sprintf("Scope(%d)", uint8(s))
}

// LevelName returns Open MPI's name for an info level: 1–3 user, 4–6 tuner,
// 7–9 developer, each basic/detail/all.
func LevelName(level int) string {
	if level < 1 || level > 9 {
		return fmt.Sprintf("level %d", level)
	}
	who := [...]string{"user", "tuner", "dev"}[(level-1)/3]
	depth := [...]string{"basic", "detail", "all"}[(level-1)%3]
	return who + "/" + depth
}

// EnumValue is one named value of an Enum, a named alias of an Int (such as
// the verbosity names), or one allowed item of a List.
type EnumValue struct {
	Value int64
	Name  string
}

// Range bounds an Int parameter, both ends included.
type Range struct{ Min, Max int64 }

// Value is a resolved parameter value with its source. Its accessors panic
// when asked for a type the parameter does not have: that is a programming
// error, not an input error.
type Value struct {
	typ    Type
	b      bool
	i      int64
	u      uint64
	s      string // String text; Enum canonical name
	list   []string
	Source Source
}

func (v Value) mustBe(ts ...Type) {
	for _, t := range ts {
		if v.typ == t {
			return
		}
	}
	panic(fmt.Sprintf("params: value of type %v read as %v", v.typ, ts))
}

// Type returns the value's type.
func (v Value) Type() Type { return v.typ }

// Bool returns the value of a Bool parameter.
func (v Value) Bool() bool { v.mustBe(Bool); return v.b }

// Int returns the value of an Int or Enum parameter (for an Enum, the number
// of the chosen name).
func (v Value) Int() int64 { v.mustBe(Int, Enum); return v.i }

// Uint returns the value of a Uint or Size parameter.
func (v Value) Uint() uint64 { v.mustBe(Uint, Size); return v.u }

// Str returns the value of a String parameter, or the chosen name of an Enum.
func (v Value) Str() string { v.mustBe(String, Enum); return v.s }

// List returns a copy of the items of a List parameter.
func (v Value) List() []string { v.mustBe(List); return append([]string(nil), v.list...) }

// String formats the value as ompi_info prints it: bools as true/false,
// numbers in decimal, enums by name, lists comma-joined.
func (v Value) String() string {
	switch v.typ {
	case Bool:
		return strconv.FormatBool(v.b)
	case Int:
		return strconv.FormatInt(v.i, 10)
	case Uint, Size:
		return strconv.FormatUint(v.u, 10)
	case String, Enum:
		return v.s
	case List:
		return strings.Join(v.list, ",")
	}
	return ""
}

// Equal reports whether two values hold the same typed value (sources are
// ignored).
func (v Value) Equal(w Value) bool {
	if v.typ != w.typ {
		return false
	}
	switch v.typ {
	case List:
		if len(v.list) != len(w.list) {
			return false
		}
		for i := range v.list {
			if v.list[i] != w.list[i] {
				return false
			}
		}
		return true
	default:
		return v.b == w.b && v.i == w.i && v.u == w.u && v.s == w.s
	}
}

// parseError is what the typed parsers return: the part of the message that
// says what is accepted. The caller adds the parameter name, value and source.
type parseError struct{ accepted string }

func (e *parseError) Error() string { return "accepted: " + e.accepted }

const (
	acceptBool = "1/0, true/false, yes/no, on/off, enabled/disabled (any case)"
	acceptInt  = "a whole number in decimal or 0x hex"
	acceptUint = "a non-negative whole number in decimal or 0x hex"
	acceptSize = "a non-negative byte count in decimal or 0x hex, optionally followed by k, m or g (x1024, x1024², x1024³)"
)

// ParseBool parses a bool: 1/0, true/false, yes/no, on/off or
// enabled/disabled, in any case.
func ParseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true", "yes", "on", "enabled":
		return true, nil
	case "0", "false", "no", "off", "disabled":
		return false, nil
	}
	return false, &parseError{acceptBool}
}

// splitNumber separates sign, base and digits. Leading zeros are decimal: a
// "010" that means 8 surprises more people than it helps.
func splitNumber(s string) (neg bool, digits string, base int) {
	s = strings.TrimSpace(s)
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		return neg, s[2:], 16
	}
	return neg, s, 10
}

func validDigits(d string, base int) bool {
	if d == "" {
		return false
	}
	for _, c := range d {
		switch {
		case c >= '0' && c <= '9':
		case base == 16 && (c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'):
		default:
			return false
		}
	}
	return true
}

// ParseInt parses a signed integer in decimal or 0x hex.
func ParseInt(s string) (int64, error) {
	neg, d, base := splitNumber(s)
	if !validDigits(d, base) {
		return 0, &parseError{acceptInt}
	}
	u, err := strconv.ParseUint(d, base, 64)
	if err != nil {
		return 0, &parseError{acceptInt + " between -9223372036854775808 and 9223372036854775807"}
	}
	if neg {
		if u > 1<<63 {
			return 0, &parseError{acceptInt + " between -9223372036854775808 and 9223372036854775807"}
		}
		return -int64(u), nil
	}
	if u > math.MaxInt64 {
		return 0, &parseError{acceptInt + " between -9223372036854775808 and 9223372036854775807"}
	}
	return int64(u), nil
}

// ParseUint parses a non-negative integer in decimal or 0x hex.
func ParseUint(s string) (uint64, error) {
	return parseUnsigned(s, false)
}

// ParseSize parses a byte count with an optional k/m/g binary suffix.
func ParseSize(s string) (uint64, error) {
	return parseUnsigned(s, true)
}

func parseUnsigned(s string, suffix bool) (uint64, error) {
	accepted := acceptUint
	if suffix {
		accepted = acceptSize
	}
	neg, d, base := splitNumber(s)
	if neg {
		return 0, &parseError{accepted}
	}
	shift := 0
	if suffix && base == 10 && d != "" {
		switch d[len(d)-1] {
		case 'k', 'K':
			shift = 10
		case 'm', 'M':
			shift = 20
		case 'g', 'G':
			shift = 30
		}
		if shift > 0 {
			d = d[:len(d)-1]
		}
	}
	if !validDigits(d, base) {
		return 0, &parseError{accepted}
	}
	u, err := strconv.ParseUint(d, base, 64)
	if err != nil || (shift > 0 && u > math.MaxUint64>>shift) {
		return 0, &parseError{accepted + " up to 18446744073709551615"}
	}
	return u << shift, nil
}

// SplitList splits a comma-separated list, trimming blanks around items. An
// empty string is the empty list; an empty item ("a,,b", "a,") is an error,
// since it is almost always a typo.
func SplitList(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
		if parts[i] == "" {
			return nil, &parseError{"a comma-separated list without empty items"}
		}
	}
	return parts, nil
}

// describeValues lists named values for an error message or a help line.
func describeValues(vals []EnumValue, withNumbers bool) string {
	var b strings.Builder
	for i, ev := range vals {
		if i > 0 {
			b.WriteString(", ")
		}
		if withNumbers {
			fmt.Fprintf(&b, "%d:%q", ev.Value, ev.Name)
		} else {
			b.WriteString(ev.Name)
		}
	}
	return b.String()
}

// parseText turns text from any source into a typed value for d.
func (d *Def) parseText(s string) (Value, error) {
	v := Value{typ: d.Type}
	var err error
	switch d.Type {
	case Bool:
		v.b, err = ParseBool(s)
	case Int:
		v.i, err = d.parseIntWithNames(s)
	case Uint:
		v.u, err = ParseUint(s)
	case Size:
		v.u, err = ParseSize(s)
	case String:
		v.s = s
	case Enum:
		v.i, v.s, err = d.parseEnum(s)
	case List:
		v.list, err = d.parseList(s)
	default:
		err = fmt.Errorf("parameter %s has no valid type", d.Name)
	}
	return v, err
}

func (d *Def) parseIntWithNames(s string) (int64, error) {
	t := strings.TrimSpace(s)
	for _, ev := range d.Values {
		if strings.EqualFold(t, ev.Name) {
			return ev.Value, nil
		}
	}
	n, err := ParseInt(t)
	if err != nil {
		if d.Range != nil || len(d.Values) > 0 {
			return 0, &parseError{d.acceptedInt()}
		}
		return 0, err
	}
	return n, d.checkRange(n)
}

func (d *Def) checkRange(n int64) error {
	if d.Range != nil && (n < d.Range.Min || n > d.Range.Max) {
		return &parseError{d.acceptedInt()}
	}
	return nil
}

func (d *Def) acceptedInt() string {
	a := acceptInt
	if d.Range != nil {
		a = fmt.Sprintf("a whole number from %d to %d", d.Range.Min, d.Range.Max)
	}
	if len(d.Values) > 0 {
		a += ", or one of the names " + describeValues(d.Values, false)
	}
	return a
}

func (d *Def) parseEnum(s string) (int64, string, error) {
	t := strings.TrimSpace(s)
	for _, ev := range d.Values {
		if strings.EqualFold(t, ev.Name) {
			return ev.Value, ev.Name, nil
		}
	}
	if n, err := ParseInt(t); err == nil {
		for _, ev := range d.Values {
			if ev.Value == n {
				return ev.Value, ev.Name, nil
			}
		}
	}
	return 0, "", &parseError{"one of " + describeValues(d.Values, false) + " (any case), or its number: " + describeValues(d.Values, true)}
}

func (d *Def) parseList(s string) ([]string, error) {
	items, err := SplitList(s)
	if err != nil || len(d.Values) == 0 {
		return items, err
	}
	for i, it := range items {
		name, ok := d.allowedItem(it)
		if !ok {
			return nil, &parseError{"a comma-separated list of " + describeValues(d.Values, false)}
		}
		items[i] = name
	}
	return items, nil
}

func (d *Def) allowedItem(it string) (string, bool) {
	for _, ev := range d.Values {
		if strings.EqualFold(it, ev.Name) {
			return ev.Name, true
		}
	}
	return "", false
}

// Accepted describes the values d accepts, for error messages and help.
func (d *Def) Accepted() string {
	switch d.Type {
	case Bool:
		return acceptBool
	case Int:
		return d.acceptedInt()
	case Uint:
		return acceptUint
	case Size:
		return acceptSize
	case Enum:
		return "one of " + describeValues(d.Values, false) + " (any case), or its number"
	case List:
		if len(d.Values) > 0 {
			return "a comma-separated list of " + describeValues(d.Values, false)
		}
		return "a comma-separated list"
	}
	return "any text"
}
