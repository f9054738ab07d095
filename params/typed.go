package params

import (
	"fmt"
	"strconv"
	"strings"
)

// parseTyped turns a TOML value into a typed value for d. TOML strings go
// through the text syntax; TOML integers and booleans are accepted as such
// where the type allows; arrays are lists.
func (d *Def) parseTyped(tv any) (Value, error) {
	switch x := tv.(type) {
	case string:
		return d.parseText(x)
	case int64:
		return d.parseTOMLInt(x)
	case bool:
		if d.Type != Bool {
			break
		}
		return Value{typ: Bool, b: x}, nil
	case []any:
		if d.Type != List {
			break
		}
		items := make([]string, 0, len(x))
		for _, e := range x {
			switch ev := e.(type) {
			case string:
				if strings.Contains(ev, ",") {
					return Value{}, &parseError{"an array of items without commas"}
				}
				items = append(items, ev)
			case int64:
				items = append(items, strconv.FormatInt(ev, 10))
			default:
				return Value{}, &parseError{d.Accepted() + ", or a TOML array of strings"}
			}
		}
		return d.parseText(strings.Join(items, ","))
	}
	return Value{}, &parseError{d.Accepted()}
}

func (d *Def) parseTOMLInt(n int64) (Value, error) {
	v := Value{typ: d.Type}
	switch d.Type {
	case Bool:
		if n != 0 && n != 1 {
			return v, &parseError{acceptBool}
		}
		v.b = n == 1
	case Int:
		if err := d.checkRange(n); err != nil {
			return v, err
		}
		v.i = n
	case Uint, Size:
		if n < 0 {
			return v, &parseError{d.Accepted()}
		}
		v.u = uint64(n)
	default: // String, Enum, List: the number's text
		return d.parseText(strconv.FormatInt(n, 10))
	}
	return v, nil
}

// describeTyped prints a TOML value with its TOML type, for error messages.
func describeTyped(tv any) string {
	switch x := tv.(type) {
	case string:
		return strconv.Quote(x)
	case int64:
		return fmt.Sprintf("%d (a TOML integer)", x)
	case bool:
		return fmt.Sprintf("%t (a TOML boolean)", x)
	case float64:
		return fmt.Sprintf("%v (a TOML float)", x)
	case []any:
		return fmt.Sprintf("%v (a TOML array)", x)
	case map[string]any:
		return "a TOML table"
	}
	return fmt.Sprintf("%v (a TOML %T)", tv, tv)
}
