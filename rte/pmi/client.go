package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gompi/gompi/mpierr"
)

// ErrNoPMI is returned by Dial when the environment names no PMI server:
// the process is a singleton.
var ErrNoPMI = errors.New("pmi: no PMI_FD or PMI_PORT in the environment")

// ErrLost is wrapped by the errors of requests made after the connection to
// the server closed.
var ErrLost = mpierr.Errorf(mpierr.ErrProcAborted, "pmi: connection to the process manager lost")

// Client is one process's connection to its PMI server, over PMI-1 or
// PMI-2 (Version). Requests are serialised: both wires have one outstanding
// request per connection here. A reader goroutine notices at once when the
// server goes away, even between requests.
type Client struct {
	conn io.ReadWriteCloser
	mu   sync.Mutex // one request at a time
	wmu  sync.Mutex // one line at a time: notices go out between a request and its answer

	lines     chan string
	lost      chan struct{}
	lostErr   error
	finalized atomic.Bool
	written   atomic.Int64

	// Rank and Size are this process's place in the job.
	Rank, Size int
	// Appnum is the application number (0 for a single program).
	Appnum int
	// KVSName is the name of the job's key-value space.
	KVSName string
	// MaxKey and MaxValue are the server's limits on key and value lengths.
	MaxKey, MaxValue int
	// Version is the wire spoken: 1 (PMI-1) or 2 (PMI-2).
	Version int

	// pending holds PMI-2 puts since the last fence (guarded by mu): a
	// PMI-2 server (Slurm's) shows a pair to nobody, its putter included,
	// before the fence; gompi's PMI-1 server shows it at once.
	pending map[string]string
}

// ClientOptions tune a client.
type ClientOptions struct {
	// OnLost is called once, from the reader goroutine, when the connection
	// closes before Finalize: the launcher is gone. It may exit the process.
	OnLost func(error)
	// OnProcFailed is called, from the reader goroutine, when the server
	// says a rank has died and the job goes on without it (gompi's mpirun
	// with --enable-recovery sends "cmd=proc_failed rank=R", outside any
	// request). Without it such lines are dropped.
	OnProcFailed func(rank int)
}

// Dial connects as the environment says: PMI_FD (an inherited, connected
// socket; rank and size from PMI_RANK and PMI_SIZE) or PMI_PORT (host:port,
// with the initack handshake presenting PMI_ID). It returns ErrNoPMI when
// neither is set. The wire is PMI-1 unless WireVersion says PMI-2, which
// needs PMI_FD.
func Dial(env map[string]string, o ClientOptions) (*Client, error) {
	version, err := WireVersion(env)
	if err != nil {
		return nil, err
	}
	if version == 2 {
		return dial2(env, o)
	}
	if fdText, ok := env["PMI_FD"]; ok {
		fd, err := strconv.Atoi(fdText)
		if err != nil || fd < 0 {
			return nil, mpierr.Errorf(mpierr.ErrIntern, "pmi: PMI_FD=%q is not a file descriptor", fdText)
		}
		rank, size, err := rankSize(env)
		if err != nil {
			return nil, err
		}
		f := os.NewFile(uintptr(fd), "pmi")
		conn, err := net.FileConn(f)
		f.Close() // FileConn dups the descriptor
		if err != nil {
			return nil, mpierr.Errorf(mpierr.ErrIntern, "pmi: PMI_FD=%d: %w", fd, err)
		}
		return NewClient(conn, rank, size, o)
	}
	if port, ok := env["PMI_PORT"]; ok {
		conn, err := net.Dial("tcp", port)
		if err != nil {
			return nil, mpierr.Errorf(mpierr.ErrIntern, "pmi: PMI_PORT=%s: %w", port, err)
		}
		c := newClient(conn, o)
		if err := c.initack(env["PMI_ID"], env[AuthEnv]); err != nil {
			conn.Close()
			return nil, err
		}
		if err := c.handshake(); err != nil {
			conn.Close()
			return nil, err
		}
		return c, nil
	}
	return nil, ErrNoPMI
}

func rankSize(env map[string]string) (int, int, error) {
	rank, size := 0, 1
	var err error
	if v, ok := env["PMI_RANK"]; ok {
		if rank, err = strconv.Atoi(v); err != nil {
			return 0, 0, mpierr.Errorf(mpierr.ErrIntern, "pmi: PMI_RANK=%q is not a number", v)
		}
	}
	if v, ok := env["PMI_SIZE"]; ok {
		if size, err = strconv.Atoi(v); err != nil {
			return 0, 0, mpierr.Errorf(mpierr.ErrIntern, "pmi: PMI_SIZE=%q is not a number", v)
		}
	}
	if size < 1 || rank < 0 || rank >= size {
		return 0, 0, mpierr.Errorf(mpierr.ErrIntern, "pmi: PMI_RANK=%d is not in 0..PMI_SIZE-1 (PMI_SIZE=%d)", rank, size)
	}
	return rank, size, nil
}

// NewClient speaks PMI-1 over an established connection whose rank and size
// are known (the PMI_FD case), and does the init exchange.
func NewClient(conn io.ReadWriteCloser, rank, size int, o ClientOptions) (*Client, error) {
	c := newClient(conn, o)
	c.Rank, c.Size = rank, size
	if err := c.handshake(); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

func newClient(conn io.ReadWriteCloser, o ClientOptions) *Client {
	c := &Client{conn: conn, lines: make(chan string, 4), lost: make(chan struct{}), Version: 1}
	r := bufio.NewReaderSize(conn, 64<<10)
	go c.read(func() (string, error) { return readLine(r) }, o.OnLost, o.OnProcFailed)
	return c
}

// procFailedPrefix starts the server's notice of a dead rank; it is
// never the answer to a request.
const procFailedPrefix = "cmd=proc_failed "

// read delivers lines (PMI-1) or frame bodies (PMI-2), as next returns
// them, to requests, and notices the end of the connection.
func (c *Client) read(next func() (string, error), onLost func(error), onFailed func(rank int)) {
	var err error
	for {
		var line string
		line, err = next()
		if err != nil {
			break
		}
		// Only gompi's PMI-1 server sends notices outside requests.
		if c.Version == 1 && strings.HasPrefix(line, procFailedPrefix) {
			if rank, ok := ParseProcFailed(line); ok && onFailed != nil {
				onFailed(rank)
			}
			continue
		}
		c.lines <- line
	}
	c.lostErr = err
	close(c.lost)
	if !c.finalized.Load() && onLost != nil {
		onLost(err)
	}
}

// readLine reads one line of at most MaxLine bytes, without its newline.
func readLine(r *bufio.Reader) (string, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > MaxLine+1 {
			return "", mpierr.Errorf(mpierr.ErrIntern, "pmi: line longer than %d bytes", MaxLine)
		}
		if err == nil {
			return string(buf[:len(buf)-1]), nil
		}
		if err != bufio.ErrBufferFull {
			if err == io.EOF && len(buf) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return "", err
		}
	}
}

func (c *Client) send(cmd Command) error {
	b := cmd.Encode()
	c.written.Add(int64(len(b)))
	c.wmu.Lock()
	_, err := c.conn.Write(b)
	c.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("pmi: sending %s: %v: %w", cmd.Name, err, ErrLost)
	}
	return nil
}

func (c *Client) receive() (Command, error) {
	parse := ParseLine
	if c.Version == 2 {
		parse = ParseFrame
	}
	select {
	case line := <-c.lines:
		return parse(line)
	case <-c.lost:
		select { // a line that arrived just before the end still counts
		case line := <-c.lines:
			return parse(line)
		default:
		}
		return Command{}, fmt.Errorf("pmi: %v: %w", c.lostErr, ErrLost)
	}
}

// call sends a request and returns its response, which must be named want
// and carry no failing rc, on the client's wire (PMI-1 lines or PMI-2
// frames).
func (c *Client) call(req Command, want string) (Command, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.callLocked(req, want)
}

func (c *Client) callLocked(req Command, want string) (Command, error) {
	send, rc := c.send, rcError
	if c.Version == 2 {
		send, rc = c.sendFrame, rcError2
	}
	if err := send(req); err != nil {
		return Command{}, err
	}
	resp, err := c.receive()
	if err != nil {
		return Command{}, err
	}
	if err := expect(resp, want); err != nil {
		return Command{}, err
	}
	return resp, rc(resp, req.Name)
}

// AuthEnv is the variable through which gompi's mpirun gives a remote rank
// the job's secret, which its initack presents (ServerConfig.Auth).
const AuthEnv = "GOMPI_PMI_AUTH"

func (c *Client) initack(id, auth string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	req := Cmd("initack", "pmiid", id)
	if auth != "" {
		req = Cmd("initack", "pmiid", id, "auth", auth)
	}
	if err := c.send(req); err != nil {
		return err
	}
	resp, err := c.receive()
	if err != nil {
		return err
	}
	if err := expect(resp, "initack"); err != nil {
		return err
	}
	for i := 0; i < 3; i++ { // set size=, set rank=, set debug=
		set, err := c.receive()
		if err != nil {
			return err
		}
		if err := expect(set, "set"); err != nil {
			return err
		}
		if v, ok := set.Get("size"); ok {
			c.Size, _ = strconv.Atoi(v)
		}
		if v, ok := set.Get("rank"); ok {
			c.Rank, _ = strconv.Atoi(v)
		}
	}
	if c.Size < 1 || c.Rank < 0 || c.Rank >= c.Size {
		return mpierr.Errorf(mpierr.ErrIntern, "pmi: initack gave rank %d of %d", c.Rank, c.Size)
	}
	return nil
}

func (c *Client) handshake() error {
	resp, err := c.call(Cmd("init", "pmi_version", "1", "pmi_subversion", "1"), "response_to_init")
	if err != nil {
		return err
	}
	if v, _ := resp.Get("pmi_version"); v != "1" {
		return mpierr.Errorf(mpierr.ErrIntern, "pmi: server speaks PMI version %q, not 1", v)
	}
	if resp, err = c.call(Cmd("get_maxes"), "maxes"); err != nil {
		return err
	}
	if c.MaxKey, err = atoiArg(resp, "keylen_max"); err != nil {
		return err
	}
	if c.MaxValue, err = atoiArg(resp, "vallen_max"); err != nil {
		return err
	}
	if resp, err = c.call(Cmd("get_appnum"), "appnum"); err != nil {
		return err
	}
	if c.Appnum, err = atoiArg(resp, "appnum"); err != nil {
		return err
	}
	if resp, err = c.call(Cmd("get_my_kvsname"), "my_kvsname"); err != nil {
		return err
	}
	c.KVSName, _ = resp.Get("kvsname")
	if c.KVSName == "" {
		return mpierr.Errorf(mpierr.ErrIntern, "pmi: empty kvsname")
	}
	return nil
}

// Put stores a key-value pair in the job's KVS; it becomes visible to the
// other processes after the next Barrier, and to this one at once. Keys and
// values must be shorter than the server's keylen_max and vallen_max:
// Hydra's limits count the terminating NUL of a C string. Over PMI-2 keys
// may have 64 bytes and values 1024, neither may hold ';' (nor a key '='),
// and job attributes (PMI_*, universeSize) cannot be put.
func (c *Client) Put(key, value string) error {
	if c.Version == 2 {
		return c.put2(key, value)
	}
	if len(key) >= c.MaxKey || len(value) >= c.MaxValue {
		return mpierr.Errorf(mpierr.ErrArg, "pmi: put of key %q (%d bytes) and a value of %d bytes: the server takes keys under %d and values under %d bytes",
			key, len(key), len(value), c.MaxKey, c.MaxValue)
	}
	_, err := c.call(Cmd("put", "kvsname", c.KVSName, "key", key, "value", value), "put_result")
	return err
}

// Get fetches a key; found is false when the server does not have it.
func (c *Client) Get(key string) (value string, found bool, err error) {
	if c.Version == 2 {
		return c.get2(key)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.send(Cmd("get", "kvsname", c.KVSName, "key", key)); err != nil {
		return "", false, err
	}
	resp, err := c.receive()
	if err != nil {
		return "", false, err
	}
	if err := expect(resp, "get_result"); err != nil {
		return "", false, err
	}
	if err := rcError(resp, "get"); err != nil {
		// A miss: Hydra answers rc=-1 msg=key_<k>_not_found, Slurm's PMI-1
		// (srun --mpi=pmi2 with GOMPI_PMI=1) a bare rc=1. Anything else (an
		// unknown KVS, say) is an error.
		msg, hasMsg := resp.Get("msg")
		if strings.HasSuffix(msg, "not_found") || !hasMsg {
			return "", false, nil
		}
		return "", false, err
	}
	v, _ := resp.Get("value")
	return v, true, nil
}

// Barrier waits until every process of the job has entered it.
func (c *Client) Barrier() error {
	if c.Version == 2 {
		return c.fence2()
	}
	_, err := c.call(Cmd("barrier_in"), "barrier_out")
	return err
}

// Finalize ends the conversation; after it, the server closing the
// connection is expected and OnLost is not called.
func (c *Client) Finalize() error {
	c.finalized.Store(true)
	var err error
	if c.Version == 2 {
		_, err = c.call(Cmd("finalize"), "finalize-response")
	} else {
		_, err = c.call(Cmd("finalize"), "finalize_ack")
	}
	c.conn.Close()
	return err
}

// Abort asks the process manager to end the whole job with code. There is no
// response; the caller exits (or is killed) next. It does not wait for a
// request in flight (a barrier that a dead rank will never join, say): the
// line goes out between the request and its answer.
//
// lost, when not empty, names the ranks this process had lost before it
// gave up, as "lost=0,2": gompi's mpirun then reports the abort as a
// consequence of their failure. Send it only to gompi's own server (other
// servers are not known to ignore unknown keys).
//
// Over PMI-2 the abort carries the message only: the wire has no exit code
// and lost is not sent (Slurm cancels the whole step either way).
func (c *Client) Abort(code int, msg string, lost ...int) error {
	c.finalized.Store(true) // the end of the connection is expected now
	if c.Version == 2 {
		return c.abort2(msg)
	}
	cmd := Cmd("abort", "exitcode", strconv.Itoa(code), "message", msg)
	if len(lost) > 0 {
		cmd.Args = append(cmd.Args, Arg{"lost", FormatRankList(lost)})
	}
	return c.send(cmd)
}

// PeerLost tells the server, with a "cmd=peer_lost rank=R" notice that has
// no answer, that this process has lost its connection to rank R: gompi's
// mpirun then knows that a failure of this process that follows is a
// consequence of R's. Only gompi's own server knows the command; it may be
// sent while a request waits for its answer. Over PMI-2 it sends nothing:
// Slurm never answers a command it does not know, and logs each one.
func (c *Client) PeerLost(rank int) error {
	if c.Version == 2 {
		return nil
	}
	return c.send(Cmd("peer_lost", "rank", strconv.Itoa(rank)))
}

// MaxRankList bounds how many ranks a rank list of a PMI line may name.
const MaxRankList = 1024

// FormatRankList writes ranks as a comma list, for ParseRankList.
func FormatRankList(ranks []int) string {
	if len(ranks) > MaxRankList {
		ranks = ranks[:MaxRankList]
	}
	parts := make([]string, len(ranks))
	for i, r := range ranks {
		parts[i] = strconv.Itoa(r)
	}
	return strings.Join(parts, ",")
}

// ParseRankList reads a comma list of ranks, each in 0..size-1, at most
// MaxRankList of them, without repeats; the order is kept. Errors carry
// mpierr.ErrIntern: a bad list is a protocol violation.
func ParseRankList(s string, size int) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxRankList {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "pmi: rank list of %d entries exceeds %d", len(parts), MaxRankList)
	}
	seen := map[int]bool{}
	out := make([]int, 0, len(parts))
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n >= size || strconv.Itoa(n) != p {
			return nil, mpierr.Errorf(mpierr.ErrIntern, "pmi: %q in rank list %q is not a rank of 0..%d", abbreviate(p), abbreviate(s), size-1)
		}
		if seen[n] {
			return nil, mpierr.Errorf(mpierr.ErrIntern, "pmi: rank %d repeats in rank list %q", n, abbreviate(s))
		}
		seen[n] = true
		out = append(out, n)
	}
	return out, nil
}

// Close closes the connection without finalizing.
func (c *Client) Close() error {
	c.finalized.Store(true)
	return c.conn.Close()
}

// Lost is closed when the connection to the server has ended.
func (c *Client) Lost() <-chan struct{} { return c.lost }

// BytesWritten is the number of bytes this client has put on the wire.
func (c *Client) BytesWritten() int64 { return c.written.Load() }

// ParseProcFailed reads a proc_failed notice; a malformed one is ignored
// (ok false). The caller checks the rank against the job.
func ParseProcFailed(line string) (rank int, ok bool) {
	cmd, err := ParseLine(line)
	if err != nil || cmd.Name != "proc_failed" {
		return 0, false
	}
	v, _ := cmd.Get("rank")
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
