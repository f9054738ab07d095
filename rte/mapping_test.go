package rte

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/gompi/gompi/mpierr"
)

func TestFormatParseMapping(t *testing.T) {
	for _, tc := range []struct {
		name   string
		nodeOf []int
		want   string
	}{
		{"one node, 4 ranks", []int{0, 0, 0, 0}, "(vector,(0,1,4))"},
		{"2 nodes x 2 ranks, block", []int{0, 0, 1, 1}, "(vector,(0,2,2))"},
		{"uneven", []int{0, 0, 0, 1}, "(vector,(0,1,3),(1,1,1))"},
		{"cyclic", []int{0, 1, 0, 1}, "(vector,(0,2,1),(0,2,1))"},
		{"single rank", []int{0}, "(vector,(0,1,1))"},
		{"4 nodes x 8, block", blockMap(4, 8), "(vector,(0,4,8))"},
		{"nodes out of order", []int{1, 1, 0, 0}, "(vector,(1,1,2),(0,1,2))"},
		{"two runs of different sizes", []int{0, 0, 1, 1, 2, 3}, "(vector,(0,2,2),(2,2,1))"},
	} {
		got := FormatMapping(tc.nodeOf)
		if got != tc.want {
			t.Errorf("%s: FormatMapping(%v) = %q, want %q", tc.name, tc.nodeOf, got, tc.want)
		}
		back, err := ParseMapping(got, len(tc.nodeOf))
		if err != nil {
			t.Errorf("%s: ParseMapping(%q): %v", tc.name, got, err)
			continue
		}
		if !reflect.DeepEqual(back, tc.nodeOf) {
			t.Errorf("%s: ParseMapping(%q, %d) = %v, want %v", tc.name, got, len(tc.nodeOf), back, tc.nodeOf)
		}
	}
}

func blockMap(nodes, ppn int) []int {
	var out []int
	for n := 0; n < nodes; n++ {
		for k := 0; k < ppn; k++ {
			out = append(out, n)
		}
	}
	return out
}

func TestParseMappingHydra(t *testing.T) {
	for _, tc := range []struct {
		s    string
		size int
		want []int
	}{
		// What Hydra publishes for mpiexec -n 2 on one host.
		{"(vector,(0,1,2))", 2, []int{0, 0}},
		// 4 nodes x 8 ppn, the example of MPICH's documentation.
		{"(vector,(0,4,8))", 32, blockMap(4, 8)},
		// Round-robin over 2 hosts (-map-by ... cyclic): one block that
		// repeats.
		{"(vector,(0,2,1))", 4, []int{0, 1, 0, 1}},
		// Shorter than the job: repeats.
		{"(vector,(0,2,1))", 5, []int{0, 1, 0, 1, 0}},
		{"(vector,(0,1,2),(1,1,1))", 7, []int{0, 0, 1, 0, 0, 1, 0}},
		// Longer than the job: cut.
		{"(vector,(0,4,8))", 3, []int{0, 0, 0}},
		{"(vector,(0,2,2))", 3, []int{0, 0, 1}},
		// Blanks around the value and around numbers are tolerated.
		{" (vector,( 0, 2 ,1 )) \n", 2, []int{0, 1}},
		{"(vector,(3,1,2))", 2, []int{3, 3}},
	} {
		got, err := ParseMapping(tc.s, tc.size)
		if err != nil {
			t.Errorf("ParseMapping(%q, %d): %v", tc.s, tc.size, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseMapping(%q, %d) = %v, want %v", tc.s, tc.size, got, tc.want)
		}
	}
}

func TestParseMappingRejects(t *testing.T) {
	for _, tc := range []struct {
		s    string
		size int
	}{
		{"", 4},
		{"vector", 4},
		{"(vector)", 4},
		{"(vector,)", 4},
		{"(vector,())", 4},
		{"(vector,(0,1))", 4},
		{"(vector,(0,1,2,3))", 4},
		{"(vector,(0,0,4))", 4},
		{"(vector,(0,1,0))", 4},
		{"(vector,(-1,1,4))", 4},
		{"(vector,(0,-1,4))", 4},
		{"(vector,(0,1,-4))", 4},
		{"(vector,(0,1,99999999999999999999999))", 4},
		{"(vector,(0,1,2000000))", 4},
		{"(vector,(9223372036854775807,1,1))", 4},
		{"(vector,(0,1,4)", 4},
		{"(vector,(0,1,4", 4},
		{"(vector,(0,1,4),", 4},
		{"(vector,(0,1,4),(1,1", 4},
		{"(vector,(0,1,4)x)", 4},
		{"(vector,(a,b,c))", 4},
		{"(vector,(0x1,1,1))", 4},
		{"(vector,0,1)", 4},
		{"(vector,[(0,1,4)]x2)", 4},
		{"(hybrid,(0,1,4))", 4},
		{"(vector,(0,1,4))", 0},
		{"(vector,(0,1,4))", -1},
	} {
		got, err := ParseMapping(tc.s, tc.size)
		if err == nil {
			t.Errorf("ParseMapping(%q, %d) = %v, want an error", tc.s, tc.size, got)
			continue
		}
		if !errors.Is(err, mpierr.ErrIntern) {
			t.Errorf("ParseMapping(%q, %d) error %v lacks ErrIntern", tc.s, tc.size, err)
		}
		if got != nil {
			t.Errorf("ParseMapping(%q, %d) returned %v with its error", tc.s, tc.size, got)
		}
	}
	// A long garbage value is abbreviated in the message.
	long := "(vector," + strings.Repeat("(0,1,x)", 100) + ")"
	if _, err := ParseMapping(long, 4); err == nil || len(err.Error()) > 200 {
		t.Errorf("error for a long value: %v", err)
	}
}

func FuzzParseMapping(f *testing.F) {
	for _, s := range []string{
		"(vector,(0,1,4))", "(vector,(0,2,2))", "(vector,(0,1,3),(1,1,1))", "(vector,(0,2,1),(0,2,1))",
		"(vector,(0,1,1))", "(vector,(0,4,8))", "(vector)", "(vector,(0,1))", "(vector,(0,0,4))",
		"(vector,(-1,1,1))", "(vector,(0,1,4)", "", " (vector,( 0, 2 ,1 )) ",
	} {
		f.Add(s, 4)
		f.Add(s, 1)
	}
	f.Fuzz(func(t *testing.T, s string, size int) {
		if size > 1<<12 {
			size %= 1 << 12
		}
		got, err := ParseMapping(s, size)
		if err != nil {
			if !errors.Is(err, mpierr.ErrIntern) {
				t.Fatalf("ParseMapping(%q, %d) error %v lacks ErrIntern", s, size, err)
			}
			return
		}
		if len(got) != size {
			t.Fatalf("ParseMapping(%q, %d) gave %d entries", s, size, len(got))
		}
		for r, n := range got {
			if n < 0 {
				t.Fatalf("ParseMapping(%q, %d)[%d] = %d", s, size, r, n)
			}
		}
		// What it parsed formats to a mapping that parses the same.
		again, err := ParseMapping(FormatMapping(got), size)
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("ParseMapping(FormatMapping(%v)) = %v, %v", got, again, err)
		}
	})
}
