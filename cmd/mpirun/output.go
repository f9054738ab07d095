package main

// Output: the ranks' standard output and error forwarded line by line,
// mpirun's own messages, and mpirun's standard input fed to rank 0.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sync"
)

// feedStdin copies mpirun's standard input to rank 0's in the background,
// and closes rank 0's at its end. It comes once every rank has started, so
// that a job that cannot start reads none of it.
func (j *job) feedStdin(stdin0 io.WriteCloser) {
	if stdin0 != nil {
		go func() {
			if j.stdin != nil {
				io.Copy(stdin0, j.stdin)
			}
			stdin0.Close()
		}()
	}
}

// outputPipes makes the pipes of a rank's standard output and error.
func outputPipes() (outR, outW, errR, errW *os.File, err error) {
	if outR, outW, err = os.Pipe(); err != nil {
		return
	}
	if errR, errW, err = os.Pipe(); err != nil {
		outR.Close()
		outW.Close()
	}
	return
}

// forward copies a rank's output line by line, so that lines of different
// ranks do not interleave, prefixed with [rank] under --tag-output.
func (j *job) forward(rank int, r *os.File, w io.Writer, wg *sync.WaitGroup) {
	defer wg.Done()
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	prefix := ""
	if j.o.tagOutput {
		prefix = fmt.Sprintf("[%d] ", rank)
	}
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			j.outMu.Lock()
			io.WriteString(w, prefix)
			w.Write(line)
			if err != nil && err != bufio.ErrBufferFull && prefix != "" && line[len(line)-1] != '\n' {
				io.WriteString(w, "\n")
			}
			j.outMu.Unlock()
		}
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
	}
}

// logf prints one of mpirun's own messages on its standard error, under
// outMu as forward writes, so that it never lands inside a rank's line.
func (j *job) logf(format string, a ...any) {
	j.outMu.Lock()
	defer j.outMu.Unlock()
	fmt.Fprintf(j.stderr, "mpirun: "+format+"\n", a...)
}
