package main

import (
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const modulePath = "github.com/gompi/gompi/"

// hotPath are functions of a small message's path that the shipped profile
// (default.pgo, made by bench/pgo.sh) must have samples in: without them
// the compiler has no call edge to turn into a direct call or to inline
// there, and gompi-bench, and every program built with the profile, lose
// what it gave (a sixth of the small-message rate).
var hotPath = []string{
	"mpi.(*Comm).Irecv",
	"mpi.(*Comm).isend",
	"frameworks/pml.(*Request).WaitInto",
	"components/pml/ob1.(*module).Irecv",
	"components/pml/ob1.(*module).Isend",
	"components/pml/ob1.(*module).recvRun",
	"components/btl/shm.(*module).Send",
	"components/btl/shm.(*consumer).poll",
}

// TestProfileNamesHotPaths checks the shipped profile against the code: it
// has samples on the message path, and every gompi function it names still
// exists (Go matches a profile to the code by function name; a renamed or
// moved function silently loses its optimization). When it fails, make
// the profile again: bench/pgo.sh.
func TestProfileNamesHotPaths(t *testing.T) {
	names, err := profileFunctions("default.pgo")
	if err != nil {
		t.Fatalf("default.pgo: %v (make it with bench/pgo.sh)", err)
	}
	for _, f := range hotPath {
		if !names[modulePath+f] {
			t.Errorf("default.pgo has no samples in %s: make it again with bench/pgo.sh", f)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for name := range names {
		pkg, recv, fn, ok := splitFuncName(name)
		if !ok {
			continue // not gompi's, or a closure, a generic instance, a wrapper
		}
		checked++
		found, err := declared(filepath.Join(root, filepath.FromSlash(pkg)), recv, fn)
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			t.Errorf("default.pgo names %s, which the code no longer declares: make the profile again with bench/pgo.sh", name)
		}
	}
	t.Logf("%d of gompi's functions in the profile checked against the code", checked)
	if checked < len(hotPath) {
		t.Errorf("default.pgo names %d of gompi's functions, want at least %d", checked, len(hotPath))
	}
}

// profileFunctions returns the strings of a gzipped pprof profile's string
// table that name gompi's functions. The profile is a protocol buffer whose
// field 6 is the string table; nothing else of it is read.
func profileFunctions(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errors.New("not a protocol buffer")
		}
		b = b[n:]
		switch key & 7 {
		case 0:
			if _, n = binary.Uvarint(b); n <= 0 {
				return nil, errors.New("bad varint")
			}
			b = b[n:]
		case 1, 5:
			w := 8
			if key&7 == 5 {
				w = 4
			}
			if len(b) < w {
				return nil, errors.New("truncated")
			}
			b = b[w:]
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < l {
				return nil, errors.New("bad length")
			}
			if key>>3 == 6 {
				if s := string(b[n : n+int(l)]); strings.HasPrefix(s, modulePath) {
					out[s] = true
				}
			}
			b = b[n+int(l):]
		default:
			return nil, fmt.Errorf("wire type %d", key&7)
		}
	}
	return out, nil
}

// funcName is a gompi function's symbol: package path, then a function or
// a method on T or *T. Closures (…func1), generic instances ([…]) and
// compiler wrappers (…-fm) do not match.
var funcName = regexp.MustCompile(`^` + regexp.QuoteMeta(modulePath) + `([a-z0-9_/-]+)\.(?:\(\*?([A-Za-z_][A-Za-z0-9_]*)\)\.)?([A-Za-z_][A-Za-z0-9_]*)$`)

func splitFuncName(name string) (pkg, recv, fn string, ok bool) {
	m := funcName.FindStringSubmatch(name)
	if m == nil {
		return "", "", "", false
	}
	return m[1], m[2], m[3], true
}

// declared reports whether the package in dir declares fn, as a method of
// recv when recv is set.
func declared(dir, recv, fn string) (bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		return false, err
	}
	var decl *regexp.Regexp
	if recv == "" {
		decl = regexp.MustCompile(`(?m)^func ` + regexp.QuoteMeta(fn) + `[\[(]`)
	} else {
		decl = regexp.MustCompile(`(?m)^func \(\w*\s*\*?` + regexp.QuoteMeta(recv) + `(\[[^\]]*\])?\) ` + regexp.QuoteMeta(fn) + `[\[(]`)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return false, err
		}
		if decl.Match(src) {
			return true, nil
		}
	}
	return false, nil
}
