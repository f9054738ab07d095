// Package pmi2test is a PMI-2 server for tests that behaves as Slurm's
// mpi/pmi2 plugin (srun --mpi=pmi2, Slurm 22.05) was seen to on the wire
// (rte/pmi/testdata/slurm-pmi2-transcript.txt): it reads the init line with
// one read and hears nothing more from a client that sent more with it,
// answers frames left-aligned, stages kvs-put until a kvs-fence that every
// rank joins (a putter does not see its own pair before it), answers a
// kvs-get miss at once with found=FALSE, answers nothing to abort or to a
// command it does not know, and closes the connection after finalize.
package pmi2test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"

	"github.com/gompi/gompi/rte/pmi"
)

// Server serves one job step of Size ranks.
type Server struct {
	Size    int
	JobID   string // job-getid's answer, "<job>.<step>"
	Mapping string // PMI_process_mapping

	mu       sync.Mutex
	kvs      map[string]string // visible after a fence
	staged   map[string]string
	fencing  []io.Writer // ranks waiting in kvs-fence
	unknown  []string    // frames of commands Slurm does not know
	aborts   []pmi.Command
	received []string // every frame body, in order
	bad      []string // what broke the protocol
	served   sync.WaitGroup
}

// NewServer returns a server of a one-node step of size ranks.
func NewServer(size int) *Server {
	return &Server{Size: size, JobID: "8.0", Mapping: fmt.Sprintf("(vector,(0,1,%d))", size),
		kvs: map[string]string{}, staged: map[string]string{}}
}

// Frame is a frame as Slurm writes it: the length %-6d, then the body.
func Frame(body string) string { return fmt.Sprintf("%-6d%s", len(body), body) }

// SocketPair returns a Unix stream socketpair, the way slurmstepd gives a
// task its PMI_FD: the task's end as a bare descriptor, which belongs to
// whoever is given it as PMI_FD (pmi.Dial closes it), and the stepd's end.
func SocketPair() (task int, stepd net.Conn, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, nil, fmt.Errorf("socketpair: %w", err)
	}
	f := os.NewFile(uintptr(fds[1]), "stepd")
	stepd, err = net.FileConn(f)
	f.Close()
	if err != nil {
		syscall.Close(fds[0])
		return -1, nil, fmt.Errorf("socketpair: %w", err)
	}
	return fds[0], stepd, nil
}

// Start serves rank on conn in a goroutine; Wait waits for every such
// conversation to end.
func (s *Server) Start(rank int, conn io.ReadWriteCloser) {
	s.served.Add(1)
	go func() {
		defer s.served.Done()
		defer conn.Close()
		s.Serve(rank, conn)
	}()
}

// Wait waits until every conversation Start began has ended.
func (s *Server) Wait() { s.served.Wait() }

func (s *Server) fail(format string, a ...any) {
	s.mu.Lock()
	s.bad = append(s.bad, fmt.Sprintf(format, a...))
	s.mu.Unlock()
}

// Serve speaks PMI-2 with rank until the connection ends or finalize.
func (s *Server) Serve(rank int, conn io.ReadWriter) {
	var init [64]byte
	n, err := conn.Read(init[:]) // one read, as the stepd does
	if err != nil || string(init[:n]) != "cmd=init pmi_version=2 pmi_subversion=0\n" {
		s.fail("rank %d: init %q, %v", rank, init[:n], err)
		return // the stepd dies here; the rank hears nothing
	}
	io.WriteString(conn, "cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n")
	r := bufio.NewReader(conn)
	answer := func(body string) { io.WriteString(conn, Frame(body)) }
	for {
		body, err := pmi.ReadFrame(r)
		if err != nil {
			if err != io.EOF {
				s.fail("rank %d: %v", rank, err)
			}
			return
		}
		s.mu.Lock()
		s.received = append(s.received, body)
		s.mu.Unlock()
		c, err := pmi.ParseFrame(body)
		if err != nil {
			s.fail("rank %d: %v", rank, err)
			return
		}
		switch c.Name {
		case "fullinit":
			_, j := c.Get("pmijobid")
			_, r := c.Get("pmirank")
			_, th := c.Get("threaded")
			rc := 0
			if !j || !r || !th {
				rc = 3 // PMI2_ERR_INVALID_ARG, as Slurm answers
				s.fail("rank %d: fullinit %q lacks pmijobid, pmirank or threaded", rank, body)
			}
			answer(fmt.Sprintf("cmd=fullinit-response;rc=%d;pmi-version=2;pmi-subversion=0;rank=%d;size=%d;appnum=-1;debugged=FALSE;pmiverbose=FALSE;", rc, rank, s.Size))
		case "job-getid":
			answer("cmd=job-getid-response;rc=0;jobid=" + s.JobID + ";")
		case "info-getjobattr":
			switch k, _ := c.Get("key"); k {
			case "PMI_process_mapping":
				answer("cmd=info-getjobattr-response;rc=0;found=TRUE;value=" + s.Mapping + ";")
			case "universeSize":
				answer(fmt.Sprintf("cmd=info-getjobattr-response;rc=0;found=TRUE;value=%d;", s.Size))
			default:
				answer("cmd=info-getjobattr-response;rc=0;found=FALSE;")
			}
		case "kvs-put":
			k, _ := c.Get("key")
			v, _ := c.Get("value")
			s.mu.Lock()
			s.staged[k] = v
			s.mu.Unlock()
			answer("cmd=kvs-put-response;rc=0;")
		case "kvs-get":
			k, _ := c.Get("key")
			s.mu.Lock()
			v, ok := s.kvs[k]
			s.mu.Unlock()
			if ok {
				answer("cmd=kvs-get-response;rc=0;found=TRUE;value=" + v + ";")
			} else {
				answer("cmd=kvs-get-response;rc=0;found=FALSE;")
			}
		case "kvs-fence":
			s.mu.Lock()
			s.fencing = append(s.fencing, conn)
			if len(s.fencing) == s.Size {
				for k, v := range s.staged {
					s.kvs[k] = v
				}
				clear(s.staged)
				for _, f := range s.fencing {
					io.WriteString(f, Frame("cmd=kvs-fence-response;rc=0;"))
				}
				s.fencing = nil
			}
			s.mu.Unlock()
		case "finalize":
			answer("cmd=finalize-response;rc=0;")
			return
		case "abort":
			s.mu.Lock()
			s.aborts = append(s.aborts, c)
			s.mu.Unlock()
		default:
			s.mu.Lock()
			s.unknown = append(s.unknown, body)
			s.mu.Unlock()
		}
	}
}

// Unknown returns the frames of commands Slurm does not know (and would
// never answer).
func (s *Server) Unknown() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.unknown...)
}

// Aborts returns the abort commands received.
func (s *Server) Aborts() []pmi.Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]pmi.Command(nil), s.aborts...)
}

// Received returns every frame body received, in order.
func (s *Server) Received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.received...)
}

// Broken returns what broke the protocol (a stepd would have logged or died).
func (s *Server) Broken() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bad...)
}
