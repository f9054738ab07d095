package params

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseValue feeds any text to every type's parser. A parser must return
// an error or a value, never panic, and a value it accepts must print as text
// that parses back to the same value.
func FuzzParseValue(f *testing.F) {
	for _, s := range []string{"1", "0x10", "-5", "64k", "1G", "true", "Disabled", "fast", "7", "a,b", "a,,b", "", " ", "0x", "+", "18446744073709551615", "9223372036854775808", "k"} {
		f.Add(s)
	}
	defs := []Def{
		{Name: "x_bool", Type: Bool},
		{Name: "x_int", Type: Int},
		{Name: "x_verbose", Type: Int, Range: &Range{0, 100}, Values: []EnumValue{{0, "error"}, {100, "max"}}},
		{Name: "x_uint", Type: Uint},
		{Name: "x_size", Type: Size},
		{Name: "x_string", Type: String},
		{Name: "x_enum", Type: Enum, Values: []EnumValue{{0, "fast"}, {1, "safe"}, {7, "paranoid"}}},
		{Name: "x_list", Type: List},
		{Name: "x_items", Type: List, Values: []EnumValue{{0, "crc"}, {1, "len"}}},
	}
	f.Fuzz(func(t *testing.T, s string) {
		for i := range defs {
			d := &defs[i]
			v, err := d.parseText(s)
			if err != nil {
				if !strings.HasPrefix(err.Error(), "accepted: ") {
					t.Fatalf("%s: error %q does not say what is accepted", d.Name, err)
				}
				continue
			}
			back, err := d.parseText(v.String())
			if err != nil {
				t.Fatalf("%s: %q parsed, but its printed form %q does not: %v", d.Name, s, v.String(), err)
			}
			if !back.Equal(v) {
				t.Fatalf("%s: %q → %q → %q: not the same value", d.Name, s, v.String(), back.String())
			}
		}
	})
}

// FuzzParamFile parses any bytes as a TOML and as a conf file. The parsers
// must return settings or an error, never panic, and every setting they
// return must carry a line inside the file.
func FuzzParamFile(f *testing.F) {
	for _, s := range []string{
		"btl_tcp_links = 5\n",
		"[btl.tcp]\nlinks = 6\nif_include = \"eth0\"\n",
		"btl = \"self\"\n[btl.tcp]\nlinks = 3\n",
		"btl.tcp.links = 1\nbtl = \"self\"\n",
		"a = \"\"\"\nx = 1\n\"\"\"\nb = [1,\n2]\nc = { d = 1 }\n",
		"# c\nbtl_tcp_if_include = \"eth0\"   # trailing\n",
		"x = 'lit'\n'q.k' = 1\n\"e\\\"s\" = 2\n",
		"[[t]]\nq = 1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := strings.Count(string(data), "\n") + 1
		for _, parse := range []func(string, []byte) ([]setting, error){ParseTOMLFile, ParseConfFile} {
			settings, err := parse("f", data)
			if err != nil {
				continue
			}
			for _, s := range settings {
				if s.src.Line < 0 || s.src.Line > lines {
					t.Fatalf("setting %s has line %d in a file of %d lines", s.name, s.src.Line, lines)
				}
			}
		}
		scanTOMLKeyLines(data) // must not panic on text the decoder refuses either
	})
}

// A parameter file is read up to a bound, and only with a known extension:
// mca_base_param_files naming /dev/zero or a huge file is an error, not all
// of memory.
func TestParamFileBounded(t *testing.T) {
	if _, err := readParamFile("/dev/zero"); err == nil || !strings.Contains(err.Error(), "unknown format") {
		t.Errorf("/dev/zero: %v", err)
	}
	big := filepath.Join(t.TempDir(), "big.conf")
	if err := os.WriteFile(big, []byte("btl = self\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := readParamFile(big); err != nil || len(s) != 1 {
		t.Fatalf("%s: %v, %v", big, s, err)
	}
	if err := os.Truncate(big, maxParamFile+1); err != nil {
		t.Fatal(err)
	}
	if _, err := readParamFile(big); err == nil || !strings.Contains(err.Error(), "is larger than") {
		msg := fmt.Sprint(err)
		t.Errorf("a file of %d bytes: %.200s", maxParamFile+1, msg)
	}
}
