package mca

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
)

// FuzzParseSelection: a selection parameter's value is the user's text,
// split as the parameter system splits lists. ParseSelection either refuses
// it with an ErrUnsupportedParam error that quotes the bad item, or returns
// one name per item, none empty or starting with '^', the exclusion flag
// the first item says, and a result that, written back in canonical form,
// parses to itself.
func FuzzParseSelection(f *testing.F) {
	for _, s := range []string{"self,tcp", "^tofu", "^aaa,bbb", "^aaa,^bbb", "aaa,^bbb", "^^aaa", "^", "", " shm , self ", "a^b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		items, err := params.SplitList(s)
		if err != nil {
			return
		}
		exclude, names, err := ParseSelection(items)
		if err != nil {
			if !errors.Is(err, mpierr.ErrUnsupportedParam) {
				t.Fatalf("ParseSelection(%q): %v lacks ErrUnsupportedParam", items, err)
			}
			named := strings.Contains(err.Error(), fmt.Sprintf("%q", strings.Join(items, ",")))
			for _, it := range items {
				named = named || strings.Contains(err.Error(), fmt.Sprintf("%q", it))
			}
			if !named {
				t.Fatalf("ParseSelection(%q): %q names none of the items", items, err)
			}
			return
		}
		if len(names) != len(items) {
			t.Fatalf("ParseSelection(%q) = %q: %d names for %d items", items, names, len(names), len(items))
		}
		if len(items) > 0 && exclude != strings.HasPrefix(items[0], "^") {
			t.Fatalf("ParseSelection(%q): exclude = %v", items, exclude)
		}
		for i, n := range names {
			if n == "" || strings.HasPrefix(n, "^") || n != strings.TrimSpace(strings.TrimPrefix(items[i], "^")) {
				t.Fatalf("ParseSelection(%q): name %q for item %q", items, n, items[i])
			}
			if !exclude && strings.HasPrefix(items[i], "^") {
				t.Fatalf("ParseSelection(%q): an inclusion with the excluded item %q", items, items[i])
			}
		}
		canonical := strings.Join(names, ",")
		if exclude {
			canonical = "^" + canonical
		}
		again, err := params.SplitList(canonical)
		if err != nil {
			t.Fatalf("ParseSelection(%q) printed as %q, which is no list: %v", items, canonical, err)
		}
		ex2, names2, err := ParseSelection(again)
		if err != nil || ex2 != exclude || !slices.Equal(names2, names) {
			t.Fatalf("ParseSelection(%q) printed as %q parses as %v %q, %v", items, canonical, ex2, names2, err)
		}
	})
}
