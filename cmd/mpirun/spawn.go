package main

// Spawning: a rank started on this host, in its own process group with its
// PMI socket, and watched until it exits.

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"

	"github.com/gompi/gompi/internal/stamp"
)

// startRanks starts every rank in rank order; each one's output is
// forwarded and its exit reported from its start (watch). It returns the
// write end of rank 0's standard input. When a rank cannot start it
// returns the error, naming the rank, and leaves the ranks already started
// to the caller to end. It comes after startServer: the ranks' environment
// names the job and the server's port, and each rank is served as it starts.
func (j *job) startRanks(outputs *sync.WaitGroup) (io.WriteCloser, error) {
	var stdin0 io.WriteCloser
	for r := 0; r < j.o.np; r++ {
		w, err := j.startRank(r, outputs)
		if err != nil {
			return nil, fmt.Errorf("starting rank %d: %w", r, err)
		}
		if r == 0 {
			stdin0 = w
		}
	}
	return stdin0, nil
}

// startRank starts one rank in its own process group, bound to its core,
// with its PMI socket as fd 3. It returns the write end of its stdin for
// rank 0.
func (j *job) startRank(rank int, outputs *sync.WaitGroup) (io.WriteCloser, error) {
	if h := j.hosts[j.hostOf[rank]]; !h.local {
		return j.startRemote(rank, h.name, outputs)
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	childPMI := os.NewFile(uintptr(fds[1]), "pmi-child")
	ourPMI := os.NewFile(uintptr(fds[0]), "pmi")
	conn, err := net.FileConn(ourPMI)
	ourPMI.Close()
	if err != nil {
		childPMI.Close()
		return nil, err
	}
	outR, outW, errR, errW, err := outputPipes()
	if err != nil {
		childPMI.Close()
		conn.Close()
		return nil, err
	}
	cmd := exec.Command(j.program, j.o.args...)
	cmd.Args[0] = j.o.program
	cmd.Env = j.rankEnv(rank)
	cmd.ExtraFiles = []*os.File{childPMI}
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdinW io.WriteCloser
	var stdinR *os.File
	if rank == 0 {
		if stdinR, stdinW, err = os.Pipe(); err != nil {
			return nil, err
		}
		cmd.Stdin = stdinR
	}
	rs := &rankState{rank: rank, cmd: cmd, pmiConn: conn, served: make(chan struct{}), host: j.host}
	j.mu.Lock()
	j.ranks = append(j.ranks, rs)
	j.mu.Unlock()

	cpu := -1
	if j.cpus != nil {
		cpu = j.cpus[rank%len(j.cpus)]
	}
	err = startOn(cmd, cpu)
	childPMI.Close()
	outW.Close()
	errW.Close()
	if stdinR != nil {
		stdinR.Close()
	}
	if err != nil {
		j.mu.Lock()
		rs.exited = true
		j.mu.Unlock()
		conn.Close()
		return nil, err
	}
	j.mu.Lock()
	rs.pid = cmd.Process.Pid
	j.mu.Unlock()
	if stamp.On() {
		stamp.Mark("rank " + strconv.Itoa(rank) + " spawned")
	}
	j.registerGroup(rs.pid)

	go func() {
		j.srv.Serve(rank, conn)
		rs.servedOnce.Do(func() { close(rs.served) })
	}()
	j.watch(rank, cmd, outR, errR, outputs)
	return stdinW, nil
}

// watch forwards a started rank's output and reports its exit.
func (j *job) watch(rank int, cmd *exec.Cmd, outR, errR *os.File, outputs *sync.WaitGroup) {
	outputs.Add(2)
	go j.forward(rank, outR, j.stdout, outputs)
	go j.forward(rank, errR, j.stderr, outputs)
	go func() {
		cmd.Wait()
		at := j.tick()
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		j.events <- event{kind: "exit", rank: rank, status: ws, at: at}
	}()
}
