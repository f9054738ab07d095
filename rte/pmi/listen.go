package pmi

import (
	"bufio"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/rte/handshakes"
)

// A server can also listen, for clients that find it through PMI_PORT (as
// Hydra's proxies are found): each connects and presents
// "cmd=initack pmiid=<rank>" first, and the server answers with the job's
// size and the rank. gompi's mpirun does not listen: it hands each rank a
// connected socket (PMI_FD), which nobody else can reach. A listening
// server is reachable by anyone who can connect, so that a stranger's
// connection must not hold it: one that has not presented its initack
// within the handshake timeout is closed, and those waiting are bounded
// (package handshakes). PMI-1 has no secret; gompi adds one: with
// ServerConfig.Auth set, the initack must carry "auth=<secret>" (gompi's
// mpirun gives it to remote ranks), and a client without it is refused.

// DefaultHandshakeTimeout is how long a PMI_PORT client has to present its
// initack when ListenConfig does not say.
const DefaultHandshakeTimeout = 5 * time.Second

// maxInitack bounds the first line of a PMI_PORT connection.
const maxInitack = 256

// ListenConfig tunes ServeListener.
type ListenConfig struct {
	// HandshakeTimeout is how long a new connection has to present its
	// initack; 0 means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// MaxPending bounds the connections waiting for their initack; 0 means
	// handshakes.DefaultMax.
	MaxPending int
}

// ServeListener serves the PMI_PORT clients that connect to ln, until ln is
// closed or the server shuts down (then it returns nil). Each client is
// served as Serve serves one.
func (s *Server) ServeListener(ln net.Listener, cfg ListenConfig) error {
	timeout := cfg.HandshakeTimeout
	if timeout <= 0 {
		timeout = DefaultHandshakeTimeout
	}
	hs := handshakes.New(cfg.MaxPending, timeout)
	done := make(chan struct{})
	defer close(done)
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.listeners = append(s.listeners, listener{ln, hs})
	s.mu.Unlock()
	defer hs.Close()
	for {
		if !hs.Room(done) {
			return nil
		}
		conn, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.shutdown
			s.mu.Unlock()
			if closing || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of descriptors, say: breathe and go on serving.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !hs.Add(conn) {
			return nil
		}
		go s.initack(conn, hs)
	}
}

type listener struct {
	ln net.Listener
	hs *handshakes.Set
}

// bufferedConn reads through the reader that read the initack, so that
// nothing the client sent after it is lost.
type bufferedConn struct {
	*bufio.Reader
	net.Conn
}

func (b bufferedConn) Read(p []byte) (int, error) { return b.Reader.Read(p) }

// initack reads a PMI_PORT client's initack, answers it and serves the
// client; anything else closes the connection.
func (s *Server) initack(conn net.Conn, hs *handshakes.Set) {
	rank, r, err := s.readInitack(conn)
	if err == nil {
		if !hs.Done(conn) {
			err = errors.New("closed before the initack ended")
		}
	} else {
		hs.Done(conn)
	}
	if err == nil {
		conn.SetDeadline(time.Time{})
		s.Serve(rank, bufferedConn{r, conn})
		s.release(rank)
		if s.cfg.Events.Ended != nil {
			s.cfg.Events.Ended(rank)
		}
		return
	}
	if rank >= 0 {
		s.release(rank)
	}
	s.rejected.Add(1)
	conn.Close()
}

// readInitack reads and answers the initack; once the rank is reserved it
// is returned even with an error, for the caller to release.
func (s *Server) readInitack(conn net.Conn) (int, *bufio.Reader, error) {
	r := bufio.NewReaderSize(conn, maxInitack)
	line, err := r.ReadSlice('\n')
	if err != nil {
		return -1, nil, fmt.Errorf("pmi: reading the initack: %w", err)
	}
	rank, auth, err := ParseInitack(string(line[:len(line)-1]), s.cfg.Size)
	if err != nil {
		return -1, nil, err
	}
	if s.cfg.Auth != "" && subtle.ConstantTimeCompare([]byte(auth), []byte(s.cfg.Auth)) != 1 {
		return -1, nil, mpierr.Errorf(mpierr.ErrIntern, "pmi: initack for rank %d without the job's secret", rank)
	}
	s.mu.Lock()
	taken := s.ported[rank] || s.shutdown
	s.ported[rank] = true
	s.mu.Unlock()
	if taken {
		return -1, nil, mpierr.Errorf(mpierr.ErrIntern, "pmi: rank %d is connected already", rank)
	}
	reply := string(Cmd("initack", "rc", "0").Encode()) +
		string(Cmd("set", "size", strconv.Itoa(s.cfg.Size)).Encode()) +
		string(Cmd("set", "rank", strconv.Itoa(rank)).Encode()) +
		string(Cmd("set", "debug", "0").Encode())
	if _, err := io.WriteString(conn, reply); err != nil {
		return rank, nil, fmt.Errorf("pmi: answering the initack: %w", err)
	}
	return rank, r, nil
}

func (s *Server) release(rank int) {
	s.mu.Lock()
	delete(s.ported, rank)
	s.mu.Unlock()
}

// ListenStats reports, over the server's listeners, the connections
// waiting for their initack now, the most that waited at once on one
// listener, how many were closed to make room, and how many were refused.
func (s *Server) ListenStats() (pending, peak int, evicted, rejected int64) {
	s.mu.Lock()
	ls := append([]listener(nil), s.listeners...)
	s.mu.Unlock()
	for _, l := range ls {
		p, pk, ev := l.hs.Stats()
		pending += p
		peak = max(peak, pk)
		evicted += ev
	}
	return pending, peak, evicted, s.rejected.Load()
}

// ParseInitack reads the first line of a PMI_PORT client,
// "cmd=initack pmiid=<rank> [auth=<secret>]", and returns the rank, which
// must be in 0..size-1, and the secret ("" when absent). Errors carry
// mpierr.ErrIntern.
func ParseInitack(line string, size int) (rank int, auth string, err error) {
	cmd, err := ParseLine(line)
	if err != nil {
		return -1, "", err
	}
	id, _ := cmd.Get("pmiid")
	rank, err = strconv.Atoi(id)
	if cmd.Name != "initack" || err != nil || rank < 0 || rank >= size || strconv.Itoa(rank) != id {
		return -1, "", mpierr.Errorf(mpierr.ErrIntern, "pmi: expected cmd=initack pmiid=<0..%d>, got %q", size-1, abbreviate(line))
	}
	auth, _ = cmd.Get("auth")
	return rank, auth, nil
}
