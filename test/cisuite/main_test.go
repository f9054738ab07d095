package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// suiteRun runs cisuite on args and returns its exit status, the summary
// lines it appended and what -print makes of them.
func suiteRun(t *testing.T, env string, args ...string) (int, []string, string, int) {
	t.Helper()
	t.Setenv("CISUITE_ALL_PASS", env)
	summary := filepath.Join(t.TempDir(), "summary")
	var out, errOut bytes.Buffer
	code := run(append([]string{"-summary", summary}, args...), &out, &errOut)
	data, err := os.ReadFile(summary)
	if err != nil {
		t.Fatalf("no summary (exit %d, stderr %q): %v", code, errOut.String(), err)
	}
	var printed bytes.Buffer
	printCode := run([]string{"-summary", summary, "-print"}, &printed, &errOut)
	return code, strings.Split(strings.TrimRight(string(data), "\n"), "\n"), printed.String(), printCode
}

func TestGoTestSuite(t *testing.T) {
	goTest := []string{"--", "go", "test", "-count=1", "-json", "./testdata/suite"}
	want := []string{
		"s TestPasses: passed",
		"s TestFails: FAILED",
		"s TestNeedsKernel: skipped: kernel: network namespaces: refused",
		"s TestNeedsProgram/sub: skipped: looking for it; needs mpiexec.mpich",
		"s TestNeedsProgram: passed",
	}
	code, lines, printed, printCode := suiteRun(t, "", append([]string{"-name", "s"}, goTest...)...)
	if code != 1 || printCode != 1 {
		t.Errorf("a failing test: exit %d, -print exit %d, want 1 and 1", code, printCode)
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("summary:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(printed, "s TestNeedsProgram/sub: skipped: looking for it; needs mpiexec.mpich") {
		t.Errorf("-print does not show the skip and its reason:\n%s", printed)
	}

	// All pass: skips are fine, unless strict and not for the kernel.
	code, _, _, printCode = suiteRun(t, "1", append([]string{"-name", "s"}, goTest...)...)
	if code != 0 || printCode != 0 {
		t.Errorf("passes and skips: exit %d, -print exit %d, want 0 and 0", code, printCode)
	}
	code, lines, _, printCode = suiteRun(t, "1", append([]string{"-name", "s", "-strict"}, goTest...)...)
	if code != 1 || printCode != 1 {
		t.Errorf("strict, a skip for want of a program: exit %d, -print exit %d, want 1 and 1", code, printCode)
	}
	for _, l := range lines {
		kernel := strings.Contains(l, "TestNeedsKernel")
		if strings.Contains(l, "skipped") && !kernel || kernel && !strings.Contains(l, ": skipped: kernel:") {
			t.Errorf("strict: %q", l)
		}
	}
}

func TestScriptSuite(t *testing.T) {
	for _, c := range []struct {
		script string
		strict bool
		code   int
		line   string
	}{
		{"echo fine", false, 0, "sh: passed"},
		{"echo 'sh: skipped: needs root'; exit 77", false, 0, "sh: skipped: needs root"},
		{"echo 'sh: skipped: needs root'; exit 77", true, 1, "sh: FAILED: needs root (CI=true: only a missing kernel feature may skip a suite here)"},
		{"echo 'skipped: kernel: no namespaces'; exit 77", true, 0, "sh: skipped: kernel: no namespaces"},
		{"exit 77", false, 0, "sh: skipped: no reason given"},
		{"echo 'skipped: maybe'; exit 3", false, 1, "sh: FAILED: exit status 3"},
		{"go test ./testdata/suite", false, 2, ""},
	} {
		args := []string{"-name", "sh"}
		if c.strict {
			args = append(args, "-strict")
		}
		cmd := []string{"--", "sh", "-c", c.script}
		if strings.HasPrefix(c.script, "go ") {
			cmd = append([]string{"--"}, strings.Fields(c.script)...)
			var out, errOut bytes.Buffer
			if code := run(append([]string{"-summary", filepath.Join(t.TempDir(), "s")}, append(args, cmd...)...), &out, &errOut); code != c.code {
				t.Errorf("%q: exit %d, want %d (%s)", c.script, code, c.code, errOut.String())
			}
			continue
		}
		code, lines, _, _ := suiteRun(t, "", append(args, cmd...)...)
		if code != c.code || len(lines) != 1 || lines[0] != c.line {
			t.Errorf("%q strict=%v: exit %d, summary %q; want %d, %q", c.script, c.strict, code, lines, c.code, c.line)
		}
	}
}

// FuzzReadOutput: whatever a suite prints, cisuite copies it and never
// panics; a result it returns has a verdict.
func FuzzReadOutput(f *testing.F) {
	f.Add([]byte(`{"Action":"output","Package":"p","Test":"T","Output":"    x_test.go:3: why\n"}` + "\n" + `{"Action":"skip","Package":"p","Test":"T"}`))
	f.Add([]byte("plain\nskipped: because\n"))
	f.Add([]byte(`{"Action":"skip","Package":"p"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		results, _ := readOutput(bytes.NewReader(data), &out, "f")
		for _, r := range results {
			if r.verdict != passVerdict && r.verdict != failVerdict && r.verdict != skipVerdict {
				t.Fatalf("result %+v has no verdict", r)
			}
		}
	})
}
