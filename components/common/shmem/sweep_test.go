package shmem

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// In a child process (TestSweep's helper): make a named segment of the job
// in GOMPI_SWEEP_JOB, say so, and wait to be killed.
func TestMain(m *testing.M) {
	if job := os.Getenv("GOMPI_SWEEP_JOB"); job != "" {
		if _, err := testOwner.Create(Path(job, "ctl-0"), 4096); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("made")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Sweep removes the files of a job whose maker was killed (SIGKILL: no
// clean-up ran), of a job of plain files nobody locks, and a half-made file,
// once they are older than sweepAge; it keeps every file of a job whose
// maker lives, even beside a dead one's, and a file younger than sweepAge
// that no lock speaks for (being made, or of a gompi that does not lock).
func TestSweep(t *testing.T) {
	base := fmt.Sprintf("sweeptest%d", os.Getpid())
	jobs := map[string]string{}
	for _, k := range []string{"killed", "plain", "young", "live", "halfold", "halfnew"} {
		jobs[k] = base + k
	}
	t.Cleanup(func() {
		for _, j := range jobs {
			RemoveJobFiles(j)
		}
	})
	if err := Usable(base); err != nil {
		t.Skip(err)
	}

	// A process that made a segment and was killed.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GOMPI_SWEEP_JOB="+jobs["killed"])
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if n, err := out.Read(buf); err != nil || string(buf[:n]) != "made\n" {
		cmd.Process.Kill()
		t.Fatalf("helper: %q %v", buf[:n], err)
	}
	// Its live lock keeps the file, old as it is, until it dies.
	old := time.Now().Add(-2 * sweepAge)
	if err := os.Chtimes(Path(jobs["killed"], "ctl-0"), old, old); err != nil {
		cmd.Process.Kill()
		t.Fatal(err)
	}
	Sweep(nil)
	if _, err := os.Stat(Path(jobs["killed"], "ctl-0")); err != nil {
		t.Fatalf("the file of a live maker was swept: %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()

	write := func(name string, mode os.FileMode, age time.Duration) {
		if err := os.WriteFile(name, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(name, mode); err != nil {
			t.Fatal(err)
		}
		then := time.Now().Add(-age)
		if err := os.Chtimes(name, then, then); err != nil {
			t.Fatal(err)
		}
	}
	write(Path(jobs["plain"], "box-0-1"), 0o600, 2*sweepAge)
	write(Path(jobs["plain"], "ctl-1"), 0o600, time.Hour)
	write(Path(jobs["young"], "ctl-0"), 0o600, 0)
	// A live job: a segment its maker (this process) holds, and a file of
	// a dead rank beside it.
	seg, err := testOwner.Create(Path(jobs["live"], "ctl-0"), 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Destroy()
	write(Path(jobs["live"], "ctl-1"), 0o600, time.Hour)
	write(Path(jobs["halfold"], "ctl-0"), 0, 2*sweepAge)
	write(Path(jobs["halfnew"], "ctl-0"), 0, 0)

	if n := Sweep(nil); n < 4 {
		t.Errorf("Sweep removed %d files, want at least 4", n)
	}
	left := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(Dir, "gompi-"+base+"*"))
	for _, f := range files {
		left[strings.TrimPrefix(filepath.Base(f), "gompi-")] = true
	}
	want := map[string]bool{jobs["live"] + "-ctl-0": true, jobs["live"] + "-ctl-1": true, jobs["halfnew"] + "-ctl-0": true, jobs["young"] + "-ctl-0": true}
	if fmt.Sprint(left) != fmt.Sprint(want) {
		t.Errorf("left %v, want %v", left, want)
	}
}
