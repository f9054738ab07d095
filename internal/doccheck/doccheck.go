// Package doccheck finds the shell blocks of the user's guide (README.md and
// docs/*.md) that are marked as runnable, so that a test can run each one
// and the guide cannot rot.
//
// A block is runnable when its opening fence's info string is "sh" followed
// by the word "runnable", then optional requirements:
//
//	```sh runnable
//	go run ./cmd/mpirun -np 4 ./examples/ring
//	```
//
//	```sh runnable root netns timeout=180
//	...
//	```
//
// Requirements: root (the test runs as root), netns (network namespaces can
// be made: "ip netns add" works), mpich (mpiexec.mpich is on PATH),
// timeout=SECONDS (default 300). Any other word is
// an error, so that a typo cannot silently turn a check off.
//
// go test -short skips the blocks (the plain pass runs them).
//
// A block runs with bash -e -o pipefail from the repository's root, with
// HOME and TMPDIR set to empty temporary directories: a block that writes
// files must write them under one of those.
package doccheck

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Block is one runnable shell block.
type Block struct {
	File     string        // the file, as given to Parse
	Line     int           // the line of the opening fence, from 1
	Script   string        // the block's text, without its fences
	Requires []string      // root, netns, mpich: in the order written
	Timeout  time.Duration // how long the block may run
}

// DefaultTimeout bounds a block that does not say timeout=.
const DefaultTimeout = 300 * time.Second

var known = map[string]bool{"root": true, "netns": true, "mpich": true}

// Parse returns the runnable blocks of the markdown text of file (used in
// positions only). Fences of backticks or tildes, three or more, as
// CommonMark has them; a block closes at a fence of the same character at
// least as long. An unterminated runnable block and an unknown requirement
// are errors.
func Parse(file, text string) ([]Block, error) {
	var blocks []Block
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	line := 0
	var (
		in      bool
		fence   string
		cur     *Block
		content strings.Builder
	)
	for sc.Scan() {
		line++
		s := sc.Text()
		t := strings.TrimLeft(s, " ")
		if !in {
			f, info, ok := openFence(t)
			if !ok {
				continue
			}
			in, fence, cur = true, f, nil
			content.Reset()
			words := strings.Fields(info)
			if len(words) < 2 || words[0] != "sh" || words[1] != "runnable" {
				continue
			}
			b := Block{File: file, Line: line, Timeout: DefaultTimeout}
			for _, w := range words[2:] {
				switch {
				case known[w]:
					b.Requires = append(b.Requires, w)
				case strings.HasPrefix(w, "timeout="):
					n, err := strconv.Atoi(strings.TrimPrefix(w, "timeout="))
					if err != nil || n <= 0 {
						return nil, fmt.Errorf("%s:%d: %q: timeout= takes a number of seconds", file, line, w)
					}
					b.Timeout = time.Duration(n) * time.Second
				default:
					return nil, fmt.Errorf("%s:%d: unknown requirement %q of a runnable block; known: root, netns, mpich, timeout=SECONDS", file, line, w)
				}
			}
			cur = &b
			continue
		}
		if strings.HasPrefix(t, fence[:1]) && strings.TrimRight(t, string(fence[0])) == "" && len(strings.TrimSpace(t)) >= len(fence) {
			if cur != nil {
				cur.Script = content.String()
				blocks = append(blocks, *cur)
			}
			in, cur = false, nil
			continue
		}
		if cur != nil {
			content.WriteString(s)
			content.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if in && cur != nil {
		return nil, fmt.Errorf("%s:%d: the runnable block is never closed", file, cur.Line)
	}
	return blocks, nil
}

// openFence reports whether t opens a fenced block, with its fence and
// info string.
func openFence(t string) (fence, info string, ok bool) {
	for _, c := range []string{"`", "~"} {
		n := len(t) - len(strings.TrimLeft(t, c))
		if n >= 3 {
			info = t[n:]
			if c == "`" && strings.Contains(info, "`") {
				return "", "", false
			}
			return t[:n], strings.TrimSpace(info), true
		}
	}
	return "", "", false
}

// ParseFile reads and parses one file; name is how errors call it.
func ParseFile(path, name string) ([]Block, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("doccheck: %w", err)
	}
	return Parse(name, string(data))
}
