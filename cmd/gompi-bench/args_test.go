package main

import (
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseArgs: gompi-bench's command line (NUL-separated words) is
// refused with a usage error, or gives options within their bounds (sizes
// from 0 to 4 MiB, a range's in increasing order) that, written back as a
// command line, parse to the same options.
func FuzzParseArgs(f *testing.F) {
	for _, a := range []string{
		"latency", "bw\x00--sizes\x000:4m\x00--iterations=100\x00--warmup\x005\x00--window\x0016",
		"allreduce\x00--sizes\x008,1k,64k\x00--scale\x000.5\x00--comm\x00incl", "idle\x00--in\x00barrier\x00--loops\x001500000000",
		"commcreate\x00--goroutines\x004\x00--probe=false", "bibw\x00--probe\x00-sizes=1k:2k", "--help", "bw\x00--sizes\x004m:1",
		"latency\x00--sizes\x005m", "reduce\x00--scale\x00NaN", "gather\x00--nonblocking\x00--root\x003",
		"latency\x00--nonblocking", "allreduce\x00--root=1", "bcast\x00--settle\x0050ms", "nbc\x00--settle=0",
	} {
		f.Add(a)
	}
	f.Fuzz(func(t *testing.T, text string) {
		args := strings.Split(text, "\x00")
		o, help, err := parseArgs(args)
		if err != nil {
			var u *usageError
			if !errors.As(err, &u) {
				t.Fatalf("parseArgs(%q): %v is not a usage error", args, err)
			}
			return
		}
		if help {
			return
		}
		if len(o.sizes) == 0 || o.window < 1 || o.window > 1024 || !(o.scale > 0 && o.scale <= 1e6) || o.loops < 1 || o.loops > 1e12 ||
			o.iterations < 0 || o.iterations > 1e9 || o.warmup < -1 || o.warmup > 1e9 || o.goroutines < 0 || o.goroutines > 1024 ||
			o.comm != "world" && o.comm != "incl" || !slices.Contains(idleWaits, o.in) || o.root < 0 || o.root > 1<<20 ||
			o.nonblock && !o.kind.isColl() || o.settle < 0 || o.settle > maxSettle {
			t.Fatalf("parseArgs(%q) = %+v", args, *o)
		}
		for i, n := range o.sizes {
			if n < 0 || n > maxSize {
				t.Fatalf("parseArgs(%q): size %d", args, n)
			}
			if i > 0 && strings.Contains(text, ":") && !strings.Contains(text, ",") && n <= o.sizes[i-1] {
				t.Fatalf("parseArgs(%q): sizes of a range %v", args, o.sizes)
			}
		}
		var sizes []string
		for _, n := range o.sizes {
			sizes = append(sizes, strconv.Itoa(n))
		}
		again := []string{o.kind.String(), "--sizes", strings.Join(sizes, ","), "--warmup=" + strconv.Itoa(o.warmup), "--window", strconv.Itoa(o.window),
			"--scale", strconv.FormatFloat(o.scale, 'g', -1, 64), "--comm", o.comm, "--in", o.in, "--loops", strconv.Itoa(o.loops),
			"--probe=" + strconv.FormatBool(o.probe)}
		if o.warmup < 0 {
			again = slices.Delete(again, 3, 4)
		}
		if o.iterations > 0 {
			again = append(again, "--iterations", strconv.Itoa(o.iterations))
		}
		if o.goroutines > 0 {
			again = append(again, "--goroutines", strconv.Itoa(o.goroutines))
		}
		again = append(again, "--nonblocking="+strconv.FormatBool(o.nonblock), "--root", strconv.Itoa(o.root), "--settle", o.settle.String())
		o2, _, err := parseArgs(again)
		if err != nil || !reflect.DeepEqual(o, o2) {
			t.Fatalf("parseArgs(%q) = %+v, written back as %q: %+v, %v", args, *o, again, o2, err)
		}
	})
}
