// Command cisuite runs one of the test suites that .ci/run cannot take for
// granted (Slurm, simulated hosts, MPICH's launcher), passes its output
// through, and appends to a summary file one line per test that ran or
// skipped, with the reason of each skip, so that a CI log ends by saying
// what was and was not tested:
//
//	cisuite -summary F -name NAME [-strict] -- go test -json ./test/netns
//	cisuite -summary F -name NAME [-strict] -- bash test/slurm/run.sh
//	cisuite -summary F -print
//
// The command's output may be go test -json (a command whose first two
// words are "go test" must be given -json): each test and subtest is then a
// line of its own. A command that runs no test is one suite: exit status 0
// passed, 77 skipped with the reason on its last line that begins
// "skipped: ", anything else failed.
//
// A skip whose reason begins "kernel:" names a kernel feature this machine
// lacks (network namespaces refused): no installation fixes it. Under
// -strict (.ci/run passes it when CI=true) any other skip fails the suite,
// since on a CI machine a suite that silently skips hides a broken path.
//
// -print writes the summary and exits 1 if any line of it failed.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
)

// Summary-line verdicts; -print fails on failVerdict.
const (
	passVerdict = "passed"
	skipVerdict = "skipped"
	failVerdict = "FAILED"
)

// skipExit is the exit status of a suite script that skipped (automake's).
const skipExit = 77

// kernelPrefix starts a skip reason that only a different kernel fixes.
const kernelPrefix = "kernel:"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cisuite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	summary := fs.String("summary", "", "the summary file to append to (or print)")
	name := fs.String("name", "", "the suite's name in the summary")
	strict := fs.Bool("strict", false, "fail a suite that skipped for a reason other than a missing kernel feature")
	print := fs.Bool("print", false, "print the summary file and fail if any line of it failed")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *summary == "" {
		fmt.Fprintln(stderr, "cisuite: -summary is required")
		return 2
	}
	if *print {
		return printSummary(*summary, stdout, stderr)
	}
	cmdArgs := fs.Args()
	if *name == "" || len(cmdArgs) == 0 {
		fmt.Fprintln(stderr, "cisuite: need -name and a command after --")
		return 2
	}
	goTest := len(cmdArgs) >= 2 && cmdArgs[0] == "go" && cmdArgs[1] == "test"
	if goTest && !contains(cmdArgs, "-json") {
		fmt.Fprintln(stderr, "cisuite: a go test command needs -json, so that each test's verdict can be read")
		return 2
	}
	cmd := exec.Command(cmdArgs[0], cmdArgs[1:]...)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(stderr, "cisuite:", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "cisuite: %s: %v\n", *name, err)
		return appendLines(*summary, stderr, []result{{name: *name, verdict: failVerdict, why: err.Error()}}, 1)
	}
	results, scriptSkip := readOutput(out, stdout, *name)
	code := 0
	if err := cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			fmt.Fprintf(stderr, "cisuite: %s: %v\n", *name, err)
			return 2
		}
		code = ee.ExitCode()
	}
	switch {
	case len(results) == 0:
		// A script, or one that skipped before it ran go test.
		results = []result{scriptVerdict(*name, code, scriptSkip)}
	case code != 0 && !anyFailed(results):
		// A build error or a failing TestMain reports no test.
		results = append(results, result{name: *name, verdict: failVerdict, why: fmt.Sprintf("exit status %d", code)})
	}
	status := 0
	for i, r := range results {
		if r.verdict == failVerdict {
			status = 1
		}
		if *strict && r.verdict == skipVerdict && !strings.HasPrefix(r.why, kernelPrefix) {
			results[i].why += " (CI=true: only a missing kernel feature may skip a suite here)"
			results[i].verdict = failVerdict
			status = 1
		}
	}
	return appendLines(*summary, stderr, results, status)
}

// result is one summary line: a test or a whole suite, its verdict, and why
// (for a skip or a failure).
type result struct{ name, verdict, why string }

func (r result) String() string {
	if r.why == "" {
		return r.name + ": " + r.verdict
	}
	return r.name + ": " + r.verdict + ": " + r.why
}

// testEvent is one line of go test -json (cmd/test2json's TestEvent).
type testEvent struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// readOutput copies the command's output to w, the events of go test
// -json as go test -v would print them, and returns a result per test, in
// the order they ended, and the reason on the last line that begins
// "skipped: " outside any test (a script's own skip).
func readOutput(r io.Reader, w io.Writer, suite string) (results []result, scriptSkip string) {
	outputs := map[string][]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var ev testEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Action == "" {
			line := sc.Text()
			fmt.Fprintln(w, line)
			if _, why, ok := strings.Cut(line, "skipped: "); ok {
				scriptSkip = strings.TrimSpace(why)
			}
			continue
		}
		key := ev.Package + " " + ev.Test
		switch ev.Action {
		case "output":
			io.WriteString(w, ev.Output)
			if ev.Test != "" {
				outputs[key] = append(outputs[key], ev.Output)
			}
		case "pass", "fail", "skip":
			if ev.Test == "" {
				if ev.Action == "skip" { // a package without tests
					results = append(results, result{name: suite + " " + ev.Package, verdict: skipVerdict, why: "no test files"})
				}
				continue
			}
			r := result{name: suite + " " + ev.Test, verdict: map[string]string{"pass": passVerdict, "fail": failVerdict, "skip": skipVerdict}[ev.Action]}
			if ev.Action == "skip" {
				r.why = skipReason(outputs[key])
			}
			results = append(results, r)
			delete(outputs, key)
		}
	}
	return results, scriptSkip
}

// logPrefix is what t.Log puts before a message: the file and line.
var logPrefix = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: `)

// skipReason is what the test logged before it skipped, without go test's
// own framing lines.
func skipReason(lines []string) string {
	var why []string
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- ") {
			continue
		}
		why = append(why, logPrefix.ReplaceAllString(l, ""))
	}
	if len(why) == 0 {
		return "no reason given"
	}
	return strings.Join(why, "; ")
}

// scriptVerdict is the result of a suite that reported no test: by its
// exit status, 0 passed, skipExit skipped (with the reason it printed).
func scriptVerdict(suite string, code int, skip string) result {
	switch code {
	case 0:
		return result{name: suite, verdict: passVerdict}
	case skipExit:
		if skip == "" {
			skip = "no reason given"
		}
		return result{name: suite, verdict: skipVerdict, why: skip}
	}
	return result{name: suite, verdict: failVerdict, why: fmt.Sprintf("exit status %d", code)}
}

func anyFailed(rs []result) bool {
	for _, r := range rs {
		if r.verdict == failVerdict {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func appendLines(path string, stderr io.Writer, rs []result, status int) int {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(stderr, "cisuite:", err)
		return 2
	}
	defer f.Close()
	for _, r := range rs {
		if _, err := fmt.Fprintln(f, r); err != nil {
			fmt.Fprintln(stderr, "cisuite:", err)
			return 2
		}
	}
	return status
}

func printSummary(path string, stdout, stderr io.Writer) int {
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(stderr, "cisuite:", err)
		return 2
	}
	fmt.Fprintln(stdout, "=== CI summary: what ran, what skipped and why ===")
	status := 0
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if line == "" {
			continue
		}
		fmt.Fprintln(stdout, line)
		if strings.Contains(line, ": "+failVerdict) {
			status = 1
		}
	}
	return status
}
