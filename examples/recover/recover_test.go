package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gompi/gompi/internal/testutil"
)

var bin struct{ mpirun, recover string }

func TestMain(m *testing.M) {
	testutil.Main(m, map[*string]string{&bin.mpirun: "../../cmd/mpirun", &bin.recover: "."})
}

var (
	goingOn  = regexp.MustCompile(`(?m)^rank (\d+): going on with (\d+) ranks from iteration \d+$`)
	finalSum = regexp.MustCompile(`(?m)^rank (\d+): final sum (\d+) over (\d+) ranks$`)
)

// The example runs as 4 processes under mpirun --enable-recovery and one
// of them kills itself with SIGKILL inside the loop: the other three each
// say once that they go on with 3 ranks, finish the loop with the sum of
// rank+1 over the survivors, and Finalize; the victim says nothing; mpirun
// exits with the victim's status, 128+SIGKILL, and names it. The last rank
// dies in one case, rank 0 (the first coordinator of Shrink's agreement)
// in the other.
func TestSurvivorsFinish(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		victim int
	}{
		{"last", nil, 3},
		{"rank0", []string{"-victim", "0", "-at", "2"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--timeout", "30", "-np", "4", "--enable-recovery", bin.recover}, tc.args...)
			p := testutil.Start(t, exec.Command(bin.mpirun, args...))
			p.Wait(t, 40*time.Second)
			out, errs := p.Stdout.String(), p.Stderr.String()
			if p.Code != 137 {
				t.Errorf("mpirun exited with %d, want 137 (the victim's SIGKILL)", p.Code)
			}
			if want := fmt.Sprintf("rank %d (pid", tc.victim); !strings.Contains(errs, want) || !strings.Contains(errs, "signal 9 (Killed)") {
				t.Errorf("mpirun's stderr does not name rank %d killed by signal 9", tc.victim)
			}
			var survivors []string
			want := 0
			for r := 0; r < 4; r++ {
				if r != tc.victim {
					survivors = append(survivors, fmt.Sprint(r))
					want += r + 1
				}
			}
			// check that each survivor printed one line matching re, with
			// the fields wanted: a line too many or a wrong field is a
			// failure (the first is shown; a broken program may print many).
			check := func(what string, re *regexp.Regexp, fields func(m []string) string, wantLine string) {
				t.Helper()
				var ranks []string
				wrong := 0
				for _, m := range re.FindAllStringSubmatch(out, -1) {
					if got := fields(m); got != wantLine {
						if wrong == 0 {
							t.Errorf("rank %s %s %s, want %s", m[1], what, got, wantLine)
						}
						wrong++
					}
					ranks = append(ranks, m[1])
				}
				sort.Strings(ranks)
				if got := strings.Join(ranks, ","); got != strings.Join(survivors, ",") {
					if len(got) > 80 {
						got = got[:80] + "…"
					}
					t.Errorf("%d lines of ranks %s %s, want one of each of %v", len(ranks), got, what, survivors)
				}
			}
			check("went on with", goingOn, func(m []string) string { return m[2] + " ranks" }, "3 ranks")
			check("ended with", finalSum, func(m []string) string { return "sum " + m[2] + " over " + m[3] }, fmt.Sprintf("sum %d over 3", want))
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", clip(out), clip(errs))
			}
		})
	}
}

// clip keeps the start of a long output for the log.
func clip(s string) string {
	if len(s) > 4000 {
		return s[:4000] + "\n…"
	}
	return s
}
