package doccheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gompi/gompi/internal/testutil"
)

var bin struct{ mpirun, ompiInfo string }

func TestMain(m *testing.M) {
	testutil.Main(m, map[*string]string{&bin.mpirun: "../../cmd/mpirun", &bin.ompiInfo: "../../cmd/ompi_info"})
}

const root = "../.."

// guideFiles are the files whose runnable blocks are checked, relative to
// the repository's root: README.md and docs/*.md (docs/notes are
// engineering notes, not the guide).
func guideFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	m, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m {
		files = append(files, filepath.ToSlash(strings.TrimPrefix(p, root+string(filepath.Separator))))
	}
	return files
}

func TestParse(t *testing.T) {
	text := "# t\n\n```sh\nnot runnable\n```\n\n````sh runnable\necho one\n```\nstill in\n````\n\n" +
		"~~~~sh runnable root netns timeout=20\necho two\n~~~~\n```go\nx := 1\n```\n"
	blocks, err := Parse("t.md", text)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 {
		t.Fatalf("%d blocks, want 2: %+v", len(blocks), blocks)
	}
	if b := blocks[0]; b.Line != 7 || b.Script != "echo one\n```\nstill in\n" || len(b.Requires) != 0 || b.Timeout != DefaultTimeout {
		t.Errorf("first block: %+v", b)
	}
	if b := blocks[1]; b.Line != 13 || b.Script != "echo two\n" || strings.Join(b.Requires, ",") != "root,netns" || b.Timeout != 20*time.Second {
		t.Errorf("second block: %+v", b)
	}
	for _, bad := range []string{"```sh runnable rot\necho\n```\n", "```sh runnable\necho\n", "```sh runnable timeout=x\n```\n"} {
		if _, err := Parse("bad.md", bad); err == nil {
			t.Errorf("Parse(%q) accepted it", bad)
		} else if !strings.Contains(err.Error(), "bad.md:1:") {
			t.Errorf("Parse(%q): %v: no position", bad, err)
		}
	}
}

// missing says why this machine cannot run a block that requires req, or
// "" when it can. A reason that begins with "kernel:" names a kernel
// feature the machine lacks (as test/netns says it).
func missing(req string) string {
	switch req {
	case "root":
		if os.Geteuid() != 0 {
			return "needs root"
		}
	case "netns":
		if _, err := exec.LookPath("ip"); err != nil {
			return "needs iproute2's ip"
		}
		probe := fmt.Sprintf("gompid-probe%d", os.Getpid())
		if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
			return fmt.Sprintf("kernel: network namespaces: ip netns add is refused here: %v: %s", err, bytes.TrimSpace(out))
		}
		exec.Command("ip", "netns", "del", probe).Run()
	case "mpich":
		if _, err := exec.LookPath("mpiexec.mpich"); err != nil {
			return "needs MPICH's mpiexec.mpich (apt-get install mpich)"
		}
	}
	return ""
}

// prelude makes `go run ./cmd/mpirun` and `go run ./cmd/ompi_info` in a
// block run the programs built once for the whole suite: the same package,
// without a link per block.
const prelude = `go() {
	if [ "$1" = run ] && [ "$2" = ./cmd/mpirun ]; then shift 2; "$DOCCHECK_MPIRUN" "$@"; return; fi
	if [ "$1" = run ] && [ "$2" = ./cmd/ompi_info ]; then shift 2; "$DOCCHECK_OMPI_INFO" "$@"; return; fi
	command go "$@"
}
`

// TestGuide runs every runnable block of the guide, in order, each from the
// repository's root with a fresh HOME and TMPDIR.
func TestGuide(t *testing.T) {
	if testing.Short() {
		// The blocks run programs in processes of their own: the plain
		// pass of go test ./... runs them; the -race -short pass would
		// only run them again, uninstrumented.
		t.Skip("the guide's blocks run in the plain pass (not under -short)")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	var all []Block
	for _, f := range guideFiles(t) {
		blocks, err := ParseFile(filepath.Join(root, f), f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, blocks...)
	}
	if len(all) == 0 {
		t.Fatal("no runnable block in the guide: the markers are gone or the parser is broken")
	}
	// A fresh HOME would move Go's caches there and rebuild (or download)
	// everything: keep the suite's.
	goenv, err := exec.Command("go", "env", "GOPATH", "GOCACHE", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	ge := strings.Fields(string(goenv))
	if len(ge) != 3 {
		t.Fatalf("go env: %q", goenv)
	}
	keep := []string{"GOPATH=" + ge[0], "GOCACHE=" + ge[1], "GOMODCACHE=" + ge[2]}
	before := treeFiles(t, abs)
	for _, b := range all {
		t.Run(fmt.Sprintf("%s:%d", b.File, b.Line), func(t *testing.T) {
			// Under pipefail, head's early exit kills the writer with
			// SIGPIPE when it has more to write: a block that fails now
			// and then. sed -n reads everything.
			if m := pipeHead.FindString(b.Script); m != "" {
				t.Fatalf("%s:%d: %q: write | sed -n 1,Np instead of | head (SIGPIPE under pipefail)", b.File, b.Line, m)
			}
			for _, req := range b.Requires {
				if why := missing(req); why != "" {
					// Under CI=true the block must run, unless only
					// another kernel would run it (as .ci/run's suites).
					if os.Getenv("CI") == "true" && !strings.HasPrefix(why, "kernel:") {
						t.Fatalf("%s:%d: cannot run here (CI=true): %s", b.File, b.Line, why)
					}
					t.Skipf("%s:%d: %s", b.File, b.Line, why)
				}
			}
			runBlock(t, abs, b, keep)
		})
	}
	after := treeFiles(t, abs)
	for p := range after {
		if !before[p] {
			t.Errorf("a runnable block left %s in the repository; blocks must write under $TMPDIR or $HOME", p)
		}
	}
}

func runBlock(t *testing.T, dir string, b Block, keep []string) {
	home, tmp := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), b.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", prelude+b.Script)
	cmd.Dir = dir
	// Own names for test/netns's simulated hosts, so that a cluster made
	// by hand with the defaults, or test/netns's own, is left alone.
	cmd.Env = append(testutil.CleanEnv(), "HOME="+home, "TMPDIR="+tmp,
		"DOCCHECK_MPIRUN="+bin.mpirun, "DOCCHECK_OMPI_INFO="+bin.ompiInfo,
		"NETNS_PREFIX=gompid", "NETNS_NET=10.251.8")
	cmd.Env = append(cmd.Env, keep...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// The block and what it starts form one process group, killed whole
	// when the time is up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s:%d: the block did not end within %v\nblock:\n%s\noutput:\n%s", b.File, b.Line, b.Timeout, b.Script, &out)
	case errors.As(err, &ee):
		t.Fatalf("%s:%d: the block failed (%v) after %v\nblock:\n%s\noutput:\n%s", b.File, b.Line, err, time.Since(start).Round(time.Millisecond), b.Script, &out)
	case err != nil:
		t.Fatalf("%s:%d: %v", b.File, b.Line, err)
	}
	t.Logf("%s:%d: passed in %v\n%s", b.File, b.Line, time.Since(start).Round(time.Millisecond), &out)
}

// treeFiles lists the repository's files outside .git.
func treeFiles(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			files[p] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var pipeHead = regexp.MustCompile(`\|\s*head\b[^|\n]*`)

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestLinks checks that every page of docs/ is reachable from the README
// (directly or through docs/README.md) and that every relative link of the
// guide names a file that exists.
func TestLinks(t *testing.T) {
	linked := map[string]bool{}
	imgMissing := false
	if _, err := os.Stat(filepath.Join(root, "docs", "img")); err != nil {
		imgMissing = true
	}
	for _, f := range guideFiles(t) {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			p := filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(f), target)))
			if f == "README.md" || f == "docs/README.md" {
				linked[p] = true
			}
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				// The plots come from bench/compare.sh's run (docs/img);
				// a checkout without that folder has none yet.
				if imgMissing && strings.HasPrefix(p, "docs/img/") {
					t.Logf("%s: %s: docs/img is not in this checkout", f, p)
					continue
				}
				t.Errorf("%s links to %s, which does not exist", f, m[1])
			}
		}
	}
	if !linked["docs/README.md"] {
		t.Errorf("README.md does not link docs/README.md, the guide's index")
	}
	for _, f := range guideFiles(t) {
		if f != "README.md" && !linked[f] {
			t.Errorf("%s is linked neither from README.md nor from docs/README.md", f)
		}
	}
}
