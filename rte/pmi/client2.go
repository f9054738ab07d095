package pmi

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/gompi/gompi/mpierr"
)

// VersionEnv overrides the choice of wire: "1" for PMI-1, "2" for PMI-2.
const VersionEnv = "GOMPI_PMI"

// WireVersion says which PMI wire the environment asks for. GOMPI_PMI=1 or
// 2 decides when set (an empty value counts as unset; anything else is an
// error of class mpierr.ErrArg). Otherwise PMI-2 is chosen when srun's
// mpi/pmi2 plugin started this process: SLURM_MPI_TYPE=pmi2 and PMI_JOBID
// set. PMI_JOBID is asked for too because a launcher started inside a Slurm
// step (gompi's mpirun) passes SLURM_MPI_TYPE on to its ranks but drops the
// PMI_ variables and serves PMI-1 itself.
func WireVersion(env map[string]string) (int, error) {
	switch v := env[VersionEnv]; v {
	case "1":
		return 1, nil
	case "2":
		return 2, nil
	case "":
	default:
		return 0, mpierr.Errorf(mpierr.ErrArg, "pmi: %s=%q: use 1 (PMI-1: gompi's mpirun, MPICH's mpiexec) or 2 (PMI-2: srun --mpi=pmi2), or leave it unset to choose from the environment",
			VersionEnv, v)
	}
	if env["SLURM_MPI_TYPE"] == "pmi2" && env["PMI_JOBID"] != "" {
		return 2, nil
	}
	return 1, nil
}

// dial2 connects over PMI_FD and speaks PMI-2.
func dial2(env map[string]string, o ClientOptions) (*Client, error) {
	fdText, ok := env["PMI_FD"]
	if !ok {
		if _, port := env["PMI_PORT"]; port {
			return nil, mpierr.Errorf(mpierr.ErrArg, "pmi: PMI-2 is spoken over PMI_FD only, and only PMI_PORT is set: set %s=1", VersionEnv)
		}
		return nil, ErrNoPMI
	}
	fd, err := strconv.Atoi(fdText)
	if err != nil || fd < 0 {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "pmi: PMI_FD=%q is not a file descriptor", fdText)
	}
	// The rank and size are the server's (fullinit); the environment's, when
	// set, must agree with them.
	rank, size := -1, -1
	if _, ok := env["PMI_RANK"]; ok {
		if rank, size, err = rankSize(env); err != nil {
			return nil, err
		}
	}
	jobID := env["PMI_JOBID"]
	if jobID == "" {
		jobID = "-1" // what Slurm's own minimal clients send; Slurm ignores it
	}
	f := os.NewFile(uintptr(fd), "pmi")
	conn, err := net.FileConn(f)
	f.Close() // FileConn dups the descriptor
	if err != nil {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "pmi: PMI_FD=%d: %w", fd, err)
	}
	return NewClient2(conn, rank, size, jobID, o)
}

// NewClient2 speaks PMI-2 over an established connection (PMI_FD): the
// PMI-1 init line, then fullinit and job-getid frames. rank and size, when
// not -1, must match what the server says; jobID is sent as fullinit's
// pmijobid (Slurm requires the key and ignores its value).
func NewClient2(conn io.ReadWriteCloser, rank, size int, jobID string, o ClientOptions) (*Client, error) {
	c := &Client{conn: conn, lines: make(chan string, 4), lost: make(chan struct{}), Version: 2,
		pending: map[string]string{}}
	r := bufio.NewReaderSize(conn, 64<<10)
	// The init line must be answered before anything else is written:
	// Slurm's stepd reads it with one read() and dies on what follows it.
	init := Cmd("init", "pmi_version", "2", "pmi_subversion", "0").Encode()
	c.written.Add(int64(len(init)))
	if _, err := conn.Write(init); err != nil {
		conn.Close()
		return nil, fmt.Errorf("pmi2: sending init: %v: %w", err, ErrLost)
	}
	line, err := readLine(r)
	if err != nil {
		conn.Close()
		if mpierr.ClassOf(err) != mpierr.ErrIntern {
			err = fmt.Errorf("pmi2: waiting for the answer to init: %v: %w", err, ErrLost)
		}
		return nil, err
	}
	resp, err := ParseLine(line)
	if err == nil {
		err = expect(resp, "response_to_init")
	}
	if err == nil {
		v, _ := resp.Get("pmi_version")
		if rc, _ := resp.Get("rc"); rc != "0" || v != "2" {
			err = mpierr.Errorf(mpierr.ErrIntern, "pmi2: the server does not speak PMI-2 (it answered %q); set %s=1 for PMI-1", abbreviate(line), VersionEnv)
		}
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	go c.read(func() (string, error) { return ReadFrame(r) }, o.OnLost, nil)

	if err := c.fullinit(rank, size, jobID); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

func (c *Client) fullinit(rank, size int, jobID string) error {
	resp, err := c.call(Cmd("fullinit", "pmijobid", jobID, "pmirank", strconv.Itoa(max(rank, 0)), "threaded", "FALSE"), "fullinit-response")
	if err != nil {
		return err
	}
	if c.Rank, err = atoiArg(resp, "rank"); err != nil {
		return err
	}
	if c.Size, err = atoiArg(resp, "size"); err != nil {
		return err
	}
	if _, ok := resp.Get("appnum"); ok {
		if c.Appnum, err = atoiArg(resp, "appnum"); err != nil {
			return err
		}
	}
	if c.Size < 1 || c.Rank < 0 || c.Rank >= c.Size {
		return mpierr.Errorf(mpierr.ErrIntern, "pmi2: fullinit gave rank %d of %d", c.Rank, c.Size)
	}
	if (rank >= 0 && rank != c.Rank) || (size >= 0 && size != c.Size) {
		return mpierr.Errorf(mpierr.ErrIntern, "pmi2: the server says rank %d of %d, the environment PMI_RANK=%d PMI_SIZE=%d", c.Rank, c.Size, rank, size)
	}
	if resp, err = c.call(Cmd("job-getid"), "job-getid-response"); err != nil {
		return err
	}
	c.KVSName, _ = resp.Get("jobid")
	if c.KVSName == "" {
		return mpierr.Errorf(mpierr.ErrIntern, "pmi2: job-getid gave no jobid")
	}
	c.MaxKey, c.MaxValue = MaxKey2, MaxValue2
	return nil
}

func (c *Client) sendFrame(cmd Command) error {
	b, err := cmd.Frame()
	if err != nil {
		return err
	}
	c.written.Add(int64(len(b)))
	c.wmu.Lock()
	_, err = c.conn.Write(b)
	c.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("pmi2: sending %s: %v: %w", cmd.Name, err, ErrLost)
	}
	return nil
}

// jobAttr reports whether key names a job attribute (PMI_process_mapping,
// universeSize, mpi_reserved_ports, …), which PMI-2 reads with
// info-getjobattr, not from the KVS. PMI-1 servers answer them as reserved
// KVS keys; Hydra refuses puts of keys starting PMI_.
func jobAttr(key string) bool {
	return strings.HasPrefix(key, "PMI_") || key == "universeSize" || key == "mpi_reserved_ports"
}

// checkKey2 refuses a key that a PMI-2 pair cannot carry as one.
func checkKey2(key string) error {
	if err := checkToken2("key", key, true); err != nil {
		return err
	}
	return nil
}

func (c *Client) put2(key, value string) error {
	if err := checkKey2(key); err != nil {
		return err
	}
	if len(key) > c.MaxKey || len(value) > c.MaxValue {
		return mpierr.Errorf(mpierr.ErrArg, "pmi2: put of key %q (%d bytes) and a value of %d bytes: PMI-2 takes keys of at most %d and values of at most %d bytes",
			key, len(key), len(value), c.MaxKey, c.MaxValue)
	}
	if jobAttr(key) {
		return mpierr.Errorf(mpierr.ErrArg, "pmi2: put of key %q: the name of a job attribute, which the KVS does not hold", key)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.callLocked(Cmd("kvs-put", "key", key, "value", value), "kvs-put-response"); err != nil {
		return err
	}
	c.pending[key] = value
	return nil
}

func (c *Client) get2(key string) (string, bool, error) {
	if err := checkKey2(key); err != nil {
		return "", false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	req, want := Cmd("kvs-get", "key", key), "kvs-get-response"
	if jobAttr(key) {
		req, want = Cmd("info-getjobattr", "key", key), "info-getjobattr-response"
	} else if v, ok := c.pending[key]; ok {
		return v, true, nil
	}
	resp, err := c.callLocked(req, want)
	if err != nil {
		return "", false, err
	}
	found, err := boolArg(resp, "found")
	if err != nil || !found {
		return "", false, err
	}
	v, ok := resp.Get("value")
	if !ok {
		return "", false, mpierr.Errorf(mpierr.ErrIntern, "pmi2: %q says found but has no value", abbreviate(resp.String()))
	}
	return v, true, nil
}

func (c *Client) fence2() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.callLocked(Cmd("kvs-fence"), "kvs-fence-response"); err != nil {
		return err
	}
	// The server holds every pair put before the fence now.
	clear(c.pending)
	return nil
}

// abort2 sends PMI-2's abort, which has no exit code and no answer (Slurm
// cancels the step at once). The message loses what PMI-2 cannot carry.
func (c *Client) abort2(msg string) error {
	msg = strings.Map(func(r rune) rune {
		if r == ';' || r == 0 {
			return ','
		}
		return r
	}, msg)
	if len(msg) > MaxValue2 {
		msg = msg[:MaxValue2]
	}
	return c.sendFrame(Cmd("abort", "isworld", "TRUE", "msg", msg))
}
