package pmi

import (
	"bufio"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gompi/gompi/mpierr"
)

// Limits advertised by the server. Keys and the KVS name follow Hydra;
// values may be longer than Hydra's 1024 bytes so that a node's modex data
// fits in few puts (clients honour whatever the server advertises).
const (
	MaxKVSName = 256
	MaxKeyLen  = 64
	// DefaultMaxValue is the vallen_max gompi's server advertises.
	DefaultMaxValue = 64 << 10
)

// Events are the server's hooks into its owner (mpirun, mpitest). Each may
// be nil. They are called from the connection's goroutine.
type Events struct {
	// Init is called when a rank sends init.
	Init func(rank int)
	// Put is called for every accepted put, with the size of its line on the
	// wire (newline included).
	Put func(rank int, key, value string, lineBytes int)
	// Finalize is called when a rank sends finalize.
	Finalize func(rank int)
	// Abort is called when a rank asks to abort the job.
	Abort func(rank, code int, msg string)
	// PeerLost is called when a rank says it has lost its connection to
	// peer (a "cmd=peer_lost" notice, or the "lost=" list of its abort,
	// which is told before Abort is called).
	PeerLost func(rank, peer int)
	// Error is called when a rank breaks the protocol; its connection is
	// then closed.
	Error func(rank int, err error)
	// Ended is called when the conversation of a rank served from a
	// listener (ServeListener) ends, for whatever reason.
	Ended func(rank int)
}

// ServerConfig describes the job a server serves.
type ServerConfig struct {
	KVSName string
	Size    int
	Appnum  int
	// MaxValue is the advertised vallen_max; 0 means DefaultMaxValue.
	MaxValue int
	// Preput are keys present from the start (PMI_process_mapping, the job
	// cookie).
	Preput map[string]string
	// Auth, when set, is the secret a PMI_PORT client must present in its
	// initack ("auth=<secret>", from GOMPI_PMI_AUTH): a listening server is
	// reachable by anyone who can connect, and without it any client that
	// names a free rank would become that rank.
	Auth   string
	Events Events
}

// Server is a PMI-1 server for one job: a KVS, a barrier, and the
// bookkeeping of which ranks initialised and finalised.
type Server struct {
	cfg ServerConfig

	mu       sync.Mutex
	kvs      map[string]string
	waiting  []*serverConn // ranks inside the barrier
	conns    map[*serverConn]bool
	shutdown bool
	failed   map[int]bool // ranks dead, the job going on without them (Failed)

	listeners []listener   // ServeListener's (listen.go)
	ported    map[int]bool // ranks connected through a listener
	rejected  atomic.Int64 // listener connections refused at the initack
}

type serverConn struct {
	rank      int
	rwc       io.ReadWriteCloser
	wmu       sync.Mutex
	inBarrier bool // guarded by Server.mu
}

func (c *serverConn) write(cmd Command) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.rwc.Write(cmd.Encode())
	return err
}

// NewServer returns a server for the job cfg describes.
func NewServer(cfg ServerConfig) *Server {
	if cfg.MaxValue == 0 {
		cfg.MaxValue = DefaultMaxValue
	}
	kvs := map[string]string{}
	for k, v := range cfg.Preput {
		kvs[k] = v
	}
	return &Server{cfg: cfg, kvs: kvs, conns: map[*serverConn]bool{}, failed: map[int]bool{}, ported: map[int]bool{}}
}

// Serve speaks PMI with one rank until the connection closes or the rank
// breaks the protocol. The caller knows the rank (PMI_FD style).
func (s *Server) Serve(rank int, rwc io.ReadWriteCloser) error {
	c := &serverConn{rank: rank, rwc: rwc}
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		rwc.Close()
		return ErrLost
	}
	s.conns[c] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		rwc.Close()
	}()
	r := bufio.NewReaderSize(rwc, 64<<10)
	for {
		line, err := readLine(r)
		if err != nil {
			s.mu.Lock()
			closing := s.shutdown
			s.mu.Unlock()
			// A line too long is the rank's fault; a connection that ends
			// (EOF, reset by a dying rank, closed by Shutdown) is not.
			if err == io.EOF || closing || mpierr.ClassOf(err) != mpierr.ErrIntern {
				return nil
			}
			s.protocolError(rank, err)
			return err
		}
		cmd, err := ParseLine(line)
		if err != nil {
			s.protocolError(rank, err)
			return err
		}
		done, err := s.handle(c, cmd, len(line)+1)
		if err != nil || done {
			return err
		}
	}
}

func (s *Server) protocolError(rank int, err error) {
	if s.cfg.Events.Error != nil {
		s.cfg.Events.Error(rank, err)
	}
}

func fail(name, msg string) Command {
	return Cmd(name, "rc", "-1", "msg", msg)
}

// handle answers one command; done reports that the conversation is over.
func (s *Server) handle(c *serverConn, cmd Command, lineBytes int) (done bool, err error) {
	ev := s.cfg.Events
	switch cmd.Name {
	case "init":
		if v, _ := cmd.Get("pmi_version"); v != "1" {
			return true, c.write(Cmd("response_to_init", "pmi_version", "1", "pmi_subversion", "1", "rc", "-1"))
		}
		if ev.Init != nil {
			ev.Init(c.rank)
		}
		return false, c.write(Cmd("response_to_init", "pmi_version", "1", "pmi_subversion", "1", "rc", "0"))
	case "get_maxes":
		return false, c.write(Cmd("maxes", "kvsname_max", strconv.Itoa(MaxKVSName),
			"keylen_max", strconv.Itoa(MaxKeyLen), "vallen_max", strconv.Itoa(s.cfg.MaxValue)))
	case "get_appnum":
		return false, c.write(Cmd("appnum", "appnum", strconv.Itoa(s.cfg.Appnum)))
	case "get_my_kvsname":
		return false, c.write(Cmd("my_kvsname", "kvsname", s.cfg.KVSName))
	case "get_universe_size":
		return false, c.write(Cmd("universe_size", "size", strconv.Itoa(s.cfg.Size)))
	case "put":
		key, _ := cmd.Get("key")
		value, _ := cmd.Get("value")
		if kvs, _ := cmd.Get("kvsname"); kvs != s.cfg.KVSName {
			return false, c.write(fail("put_result", "unknown_kvsname"))
		}
		switch {
		case key == "" || len(key) > MaxKeyLen:
			return false, c.write(fail("put_result", "invalid_key"))
		case strings.HasPrefix(key, "PMI_"):
			return false, c.write(fail("put_result", "key_reserved"))
		case len(value) > s.cfg.MaxValue:
			return false, c.write(fail("put_result", "value_too_long"))
		}
		s.mu.Lock()
		_, dup := s.kvs[key]
		if !dup {
			s.kvs[key] = value
		}
		s.mu.Unlock()
		if dup {
			return false, c.write(fail("put_result", "duplicate_key"))
		}
		if ev.Put != nil {
			ev.Put(c.rank, key, value, lineBytes)
		}
		return false, c.write(Cmd("put_result", "rc", "0", "msg", "success"))
	case "get":
		key, _ := cmd.Get("key")
		s.mu.Lock()
		v, ok := s.kvs[key]
		s.mu.Unlock()
		if !ok {
			return false, c.write(Cmd("get_result", "rc", "-1", "msg", "key_"+key+"_not_found", "value", "unknown"))
		}
		return false, c.write(Cmd("get_result", "rc", "0", "msg", "success", "value", v))
	case "barrier_in":
		s.mu.Lock()
		if c.inBarrier {
			s.mu.Unlock()
			err := mpierr.Errorf(mpierr.ErrIntern, "pmi: rank %d entered the barrier twice", c.rank)
			s.protocolError(c.rank, err)
			return true, err
		}
		c.inBarrier = true
		s.waiting = append(s.waiting, c)
		release := s.releaseLocked()
		s.mu.Unlock()
		for _, w := range release {
			w.write(Cmd("barrier_out")) // a rank that is gone will notice itself
		}
		return false, nil
	case "finalize":
		if ev.Finalize != nil {
			ev.Finalize(c.rank)
		}
		return true, c.write(Cmd("finalize_ack"))
	case "abort":
		code := 1
		if v, ok := cmd.Get("exitcode"); ok {
			if n, err := strconv.Atoi(v); err == nil {
				code = n
			}
		}
		msg, _ := cmd.Get("message")
		if v, ok := cmd.Get("lost"); ok && ev.PeerLost != nil {
			// A bad list does not stop the abort: the job ends anyway.
			lost, _ := ParseRankList(v, s.cfg.Size)
			for _, p := range lost {
				if p != c.rank {
					ev.PeerLost(c.rank, p)
				}
			}
		}
		if ev.Abort != nil {
			ev.Abort(c.rank, code, msg)
		}
		return true, nil
	case "peer_lost":
		// A notice: no answer, the client is not waiting for one.
		v, _ := cmd.Get("rank")
		if p, err := strconv.Atoi(v); err == nil && p >= 0 && p < s.cfg.Size && p != c.rank && ev.PeerLost != nil {
			ev.PeerLost(c.rank, p)
		}
		return false, nil
	}
	return false, c.write(fail(cmd.Name+"_result", "unknown_command"))
}

// releaseLocked empties the barrier when every living rank is in it.
func (s *Server) releaseLocked() []*serverConn {
	var live []*serverConn
	for _, w := range s.waiting {
		if !s.failed[w.rank] {
			live = append(live, w)
		}
	}
	if len(s.waiting) == 0 || len(live) < s.cfg.Size-len(s.failed) {
		return nil
	}
	s.waiting = nil
	for _, w := range live {
		w.inBarrier = false
	}
	return live
}

// Failed records that rank has died and the job goes on without it (mpirun
// --enable-recovery): barriers wait for the living ranks only, and every
// living rank is told with a "cmd=proc_failed rank=R" line, so that its
// operations with the dead one end with a process-failure error instead of
// waiting for ever.
func (s *Server) Failed(rank int) {
	s.mu.Lock()
	if rank < 0 || rank >= s.cfg.Size || s.failed[rank] {
		s.mu.Unlock()
		return
	}
	s.failed[rank] = true
	release := s.releaseLocked()
	var tell []*serverConn
	for c := range s.conns {
		if c.rank != rank {
			tell = append(tell, c)
		}
	}
	s.mu.Unlock()
	for _, c := range tell {
		c.write(Cmd("proc_failed", "rank", strconv.Itoa(rank)))
	}
	for _, w := range release {
		w.write(Cmd("barrier_out"))
	}
}

// Shutdown closes every connection; ranks waiting on the server see their
// requests fail.
func (s *Server) Shutdown() {
	s.mu.Lock()
	s.shutdown = true
	conns := make([]*serverConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	ls := s.listeners
	s.mu.Unlock()
	for _, l := range ls {
		l.ln.Close()
		l.hs.Close()
	}
	for _, c := range conns {
		c.rwc.Close()
	}
}

// Value returns a key of the KVS, for the server's owner.
func (s *Server) Value(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.kvs[key]
	return v, ok
}
