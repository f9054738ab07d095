package main

import (
	"bufio"
	"bytes"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/gompi/gompi/internal/testutil"
)

// nbcLine is one line of the nbc benchmark: its first word and its
// key=value fields.
type nbcLine struct {
	what   string
	fields map[string]float64
	text   string
}

// parseNBC reads the nbc benchmark's output as the comparison's summary
// does: a "# nbc ranks=<n> lib=…" header first, then lines of a word and
// key=value fields; every value but lib's is a number.
func parseNBC(t *testing.T, out string) (ranks int, lines []nbcLine) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	first := true
	for sc.Scan() {
		text := sc.Text()
		if first {
			first = false
			rest, ok := strings.CutPrefix(text, "# nbc ranks=")
			n, lib, _ := strings.Cut(rest, " lib=")
			var err error
			if ranks, err = strconv.Atoi(n); !ok || err != nil || !strings.HasPrefix(lib, "gompi ") || len(lib) > 80 {
				t.Fatalf("the first line %q is not nbc.c's header (# nbc ranks=<n> lib=<at most 80 characters>):\n%s", text, out)
			}
			continue
		}
		f := strings.Fields(text)
		if len(f) < 2 {
			t.Fatalf("line %q: want a word and key=value fields:\n%s", text, out)
		}
		l := nbcLine{what: f[0], fields: map[string]float64{}, text: text}
		for _, kv := range f[1:] {
			k, v, ok := strings.Cut(kv, "=")
			x, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("line %q: field %q is not key=<number>", text, kv)
			}
			l.fields[k] = x
		}
		lines = append(lines, l)
	}
	return ranks, lines
}

// want checks that l is what and has every key, in that order, with the
// values pos says are positive above zero.
func (l nbcLine) check(t *testing.T, what string, size int, keys []string, pos func(string) bool) {
	t.Helper()
	if l.what != what || l.fields["size"] != float64(size) {
		t.Errorf("line %q: want %s size=%d", l.text, what, size)
		return
	}
	var got []string
	for _, kv := range strings.Fields(l.text)[1:] {
		k, _, _ := strings.Cut(kv, "=")
		got = append(got, k)
	}
	if strings.Join(got, " ") != strings.Join(keys, " ") {
		t.Errorf("line %q: fields %v, want %v", l.text, got, keys)
	}
	for _, k := range keys {
		if pos(k) && !(l.fields[k] > 0) {
			t.Errorf("line %q: %s is not above 0", l.text, k)
		}
	}
}

// nbc.c's fields, in its order.
var nbcKeys = strings.Fields("size iters pure_us cpu_us ovrl_us overlap ovrl_t_us overlap_t pre post")

// checkNBC checks a run's output: nbc.c's lines (Ibarrier, then Iallreduce
// per size) with their fields and overlap by its definition, then per
// operation the persistent, blocking and W lines; the probe fields are
// measured (above 0) or -1.
func checkNBC(t *testing.T, out string, ranks int, sizes []int, probed bool) {
	t.Helper()
	n, lines := parseNBC(t, out)
	if n != ranks {
		t.Errorf("header says %d ranks, want %d", n, ranks)
	}
	ops := append([]int{0}, sizes...)
	if len(lines) != 4*len(ops) {
		t.Fatalf("%d lines, want %d: nbc.c's %d and 3 more per operation:\n%s", len(lines), 4*len(ops), len(ops), out)
	}
	probe := func(l nbcLine) {
		for _, k := range []string{"pre", "post"} {
			if v := l.fields[k]; probed && !(v > 0) || !probed && v != -1 {
				t.Errorf("line %q: %s=%v, want %s", l.text, k, v, map[bool]string{true: "a probe above 0", false: "-1"}[probed])
			}
		}
	}
	pos := func(k string) bool { return strings.HasSuffix(k, "_us") || k == "iters" }
	for i, size := range ops {
		what := "iallreduce"
		if i == 0 {
			what = "ibarrier"
		}
		l := lines[i]
		l.check(t, what, size, nbcKeys, pos)
		probe(l)
		f := l.fields
		for _, k := range []string{"overlap", "overlap_t"} {
			if f[k] < 0 || f[k] > 100 {
				t.Errorf("line %q: %s is not a percentage", l.text, k)
			}
		}
		// The printed overlap is OSU's, from the printed means. Each mean
		// is rounded to 3 decimals (±0.0005) and the overlap to 1 (±0.05),
		// so the slack is the rounding carried through the formula: ovrl
		// and cpu each move it by 100·0.0005/pure, pure by that times
		// (ovrl-cpu)/pure.
		for k, ovrl := range map[string]float64{"overlap": f["ovrl_us"], "overlap_t": f["ovrl_t_us"]} {
			pure := f["pure_us"]
			want := math.Min(math.Max(100*(1-(ovrl-f["cpu_us"])/pure), 0), 100)
			slack := 0.05 + 100*0.0005/pure*(2+math.Abs(ovrl-f["cpu_us"])/pure) + 1e-9
			if math.Abs(f[k]-want) > slack {
				t.Errorf("line %q: %s=%v, want 100*(1-(%v-%v)/%v) = %.2f", l.text, k, f[k], ovrl, f["cpu_us"], f["pure_us"], want)
			}
		}
		x := lines[len(ops)+3*i:]
		x[0].check(t, what+"_persistent", size, strings.Fields("size iters start_wait_us pre post"), pos)
		x[1].check(t, what[1:], size, strings.Fields("size iters blocking_us pre post"), pos)
		x[2].check(t, what+"_w", size, strings.Fields("size iters w_us done compute_us pure_cpu_us pure_csw test_us pre post"),
			func(k string) bool { return k == "iters" || k == "compute_us" || k == "pure_cpu_us" || k == "test_us" })
		if d := x[2].fields["done"]; d < 0 || d > 1 {
			t.Errorf("line %q: done is not a fraction", x[2].text)
		}
		for _, l := range x[:3] {
			probe(l)
			if l.fields["iters"] != f["iters"] {
				t.Errorf("line %q: iters differ from nbc.c's line %q", l.text, lines[i].text)
			}
		}
	}
}

// The nbc benchmark prints nbc.c's lines, then its own, under mpirun: at
// two ranks with the placement probe, at three (no probe: -1), and alone.
func TestNBC(t *testing.T) {
	t.Run("2 ranks", func(t *testing.T) {
		out := mpirun(t, "-np", "2", bin.bench, "nbc", "--sizes", "8,1k,64k", "--scale", "0.002", "--probe")
		checkNBC(t, out, 2, []int{8, 1024, 65536}, true)
		// --scale multiplies nbc.c's iterations, at least 10.
		_, lines := parseNBC(t, out)
		for i, want := range []float64{40, 40, 20, 10} {
			if got := lines[i].fields["iters"]; got != want {
				t.Errorf("line %q: iters=%v, want %v", lines[i].text, got, want)
			}
		}
		t.Log("\n" + out)
	})
	t.Run("3 ranks", func(t *testing.T) {
		out := mpirun(t, "-np", "3", bin.bench, "nbc", "--sizes", "8", "--iterations", "12", "--probe")
		checkNBC(t, out, 3, []int{8}, false)
	})
	t.Run("singleton", func(t *testing.T) {
		cmd := exec.Command(bin.bench, "nbc", "--sizes", "1k", "--iterations", "10")
		cmd.Env = testutil.CleanEnv()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		checkNBC(t, string(out), 1, []int{1024}, false)
	})
}
