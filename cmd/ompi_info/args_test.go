package main

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseArgs: ompi_info's command line (NUL-separated words) is refused
// with a usage error, or gives a level from 1 to 9, at most one output
// form, and options that, written back as a command line, parse to the
// same options.
func FuzzParseArgs(f *testing.F) {
	for _, a := range []string{
		"--param\x00btl\x00tcp\x00--level\x009", "--all\x00--parsable", "-a\x00-l\x003\x00--json", "--mca\x00btl\x00self\x00--param\x00all\x00all",
		"--parsable\x00--json", "--level\x0010", "-V", "--help", "stray", "--param\x00btl", "-",
	} {
		f.Add(a)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var args []string
		if text != "" {
			args = strings.Split(text, "\x00")
		}
		o, err := parseArgs(args)
		if err != nil {
			var u *usageError
			if !errors.As(err, &u) {
				t.Fatalf("parseArgs(%q): %v is not a usage error", args, err)
			}
			return
		}
		if o.level < 1 || o.level > 9 || o.parsable && o.json {
			t.Fatalf("parseArgs(%q) = %+v", args, *o)
		}
		again := []string{"--level", strconv.Itoa(o.level)}
		for _, p := range o.params {
			again = append(again, "--param", p[0], p[1])
		}
		for _, s := range o.mca {
			again = append(again, "--mca", s.Name, s.Value)
		}
		for flag, set := range map[string]bool{"--all": o.all, "--parsable": o.parsable, "--json": o.json, "--help": o.help, "--version": o.version} {
			if set {
				again = append(again, flag)
			}
		}
		o2, err := parseArgs(again)
		if err != nil || !reflect.DeepEqual(o, o2) {
			t.Fatalf("parseArgs(%q) = %+v, written back as %q: %+v, %v", args, *o, again, o2, err)
		}
	})
}
