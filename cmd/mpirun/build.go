package main

// The program: found in PATH or on disk, or built from a directory of Go
// source into a temporary directory that the job removes at its end.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// resolveProgram finds the executable, building a Go source directory first.
func (j *job) resolveProgram() error {
	p := j.o.program
	st, err := os.Stat(p)
	if err == nil && st.IsDir() {
		return j.build(p)
	}
	if !strings.Contains(p, "/") {
		path, err := exec.LookPath(p)
		if err != nil {
			return fmt.Errorf("program %q: not found in PATH", p)
		}
		j.program = path
		return nil
	}
	if err != nil {
		return fmt.Errorf("program %q: %v", p, errors.Unwrap(err))
	}
	if st.Mode()&0o111 == 0 {
		return fmt.Errorf("program %q is not executable (mode %v)", p, st.Mode().Perm())
	}
	j.program, _ = filepath.Abs(p)
	return nil
}

// build compiles a directory of Go source into a temporary executable.
func (j *job) build(dir string) error {
	matches, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	if len(matches) == 0 {
		return fmt.Errorf("program %q is a directory without Go source", dir)
	}
	tmp, err := os.MkdirTemp("", "gompi-build-")
	if err != nil {
		return err
	}
	j.buildDir = tmp
	abs, _ := filepath.Abs(dir)
	out := filepath.Join(tmp, filepath.Base(abs))
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = abs
	cmd.Env = j.environ
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %v\n%s", dir, err, msg)
	}
	j.program = out
	return nil
}

// cleanup removes the program built from source, if any: run defers it, and
// newJob calls it when a step after the build fails.
func (j *job) cleanup() {
	if j.buildDir != "" {
		os.RemoveAll(j.buildDir)
	}
}
