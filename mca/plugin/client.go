package plugin

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
)

// The host's side of go-plugin, written from go-plugin v1.8.0's client
// (client.go, grpc_client.go, grpc_stdio.go): the environment a plugin is
// started with, the handshake line, the gRPC connection, the stdio stream
// a go-plugin server expects to be read, and the stop through
// plugin.GRPCController. go-plugin's client brought gRPC and protobuf into
// every gompi program; this brings neither.

// Methods of go-plugin's own services that the host calls.
const (
	stdioMethod    = "/plugin.GRPCStdio/StreamStdio"
	shutdownMethod = "/plugin.GRPCController/Shutdown"
)

// stopGrace is how long a plugin asked to stop has to exit before it is
// killed (go-plugin's).
const stopGrace = 2 * time.Second

// pipeGrace bounds the wait for the end of a plugin's stdout and stderr
// once it has exited: a child it left behind may hold them open.
const pipeGrace = 2 * time.Second

// stdioQuiet is how long Stop waits for silence on a plugin's stdio stream
// before it asks the plugin to stop (at most stopGrace): go-plugin's
// Shutdown stops the plugin's gRPC server at once, cutting the stream, and
// what the plugin wrote just before, still on its way from its pipes to
// the stream, was lost (the last 230 of 14 000 lines, on a loaded machine).
const stdioQuiet = 20 * time.Millisecond

// Process is a running plugin.
type Process struct {
	path    string
	timeout time.Duration
	log     hclog.Logger
	proc    *os.Process
	state   *os.ProcessState // set before exited is closed
	sock    *sockDir         // the plugin's socket's folder, removed at the end
	conn    *h2conn
	stderr  *tail
	lines   [2]*stderrLog // the pipe's and the stdio stream's, feeding stderr
	// lastStdio is when the stdio stream last brought something
	// (UnixNano).
	lastStdio atomic.Int64

	exited  chan struct{} // closed when the process has been reaped
	errDone chan struct{} // closed at the end of its stderr pipe
	outDone chan struct{} // closed at the end of its stdout pipe

	mu      sync.Mutex
	broken  error // set when a call failed: the process is gone or stopped
	endOnce sync.Once
}

// start runs the plugin at path and connects to it: go-plugin's handshake
// for protocol version api, within timeout. Its errors say why, in terms
// the user can act on.
func start(path, framework string, api int, timeout time.Duration, log hclog.Logger) (*Process, error) {
	errTail := &tail{}
	errLog := log.Named(filepath.Base(path))
	p := &Process{
		path: path, timeout: timeout, log: log, stderr: errTail,
		lines:  [2]*stderrLog{{log: errLog, tail: errTail}, {log: errLog, tail: errTail}},
		exited: make(chan struct{}), errDone: make(chan struct{}), outDone: make(chan struct{}),
	}
	// fail stops the plugin and says why, with what its stderr says when
	// that may help (read to its end: the process is gone).
	fail := func(withStderr bool, format string, a ...any) (*Process, error) {
		p.kill()
		msg := fmt.Sprintf(format, a...)
		if withStderr {
			msg += stderrNote(errTail.String())
		}
		return nil, mpierr.Errorf(mpierr.ErrComponentNotFound, "%s", msg)
	}
	var err error
	// go-plugin's server makes its socket in PLUGIN_UNIX_SOCKET_DIR (else
	// $TMPDIR): a folder of the plugin's own lets the host remove the
	// socket of a plugin it had to kill (sockdir.go).
	if p.sock, err = makeSockDir(); err != nil {
		return nil, mpierr.Errorf(mpierr.ErrComponentNotFound, "it could not be started: %v", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		p.sock.remove()
		return nil, mpierr.Errorf(mpierr.ErrComponentNotFound, "it could not be started: %v", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		p.sock.remove()
		return nil, mpierr.Errorf(mpierr.ErrComponentNotFound, "it could not be started: %v", err)
	}
	// os.StartProcess rather than os/exec: this runs in every gompi
	// program's binary, and needs nothing os/exec adds.
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		p.sock.remove()
		return nil, mpierr.Errorf(mpierr.ErrComponentNotFound, "it could not be started: %v", err)
	}
	env := append(os.Environ(),
		CookieKey+"="+CookieValue,
		"PLUGIN_PROTOCOL_VERSIONS="+strconv.Itoa(api),
		// A Go plugin serves on a Unix socket; gompi sets no port range
		// for the others.
		"PLUGIN_MIN_PORT=0", "PLUGIN_MAX_PORT=0",
		"PLUGIN_UNIX_SOCKET_DIR="+p.sock.path)
	proc, err := os.StartProcess(path, []string{path}, &os.ProcAttr{
		Env: env,
		// The plugin's stdin is /dev/null: the host's may be the job's
		// input.
		Files: []*os.File{devNull, outW, errW},
		// The kernel kills the plugin when its host dies (even by kill
		// -9); the guest also watches its parent, for the case where the
		// forking thread ends first.
		Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	devNull.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		p.sock.remove()
		return nil, mpierr.Errorf(mpierr.ErrComponentNotFound, "it could not be started: %v", err)
	}
	p.proc = proc
	go func() {
		st, err := proc.Wait()
		if err == nil {
			p.state = st
			log.Debug("plugin process exited", "path", path, "status", st.String())
		}
		close(p.exited)
	}()
	go p.readStderr(errR)
	type first struct {
		line string
		ok   bool
	}
	lines := make(chan first, 1)
	go func() {
		defer close(p.outDone)
		defer outR.Close()
		br := bufio.NewReaderSize(outR, 4096)
		line, ok, _ := readFirstLine(br, maxHandshakeLine)
		lines <- first{line, ok}
		// Later lines are thrown away (go-plugin's way), but read: a
		// plugin blocked on a full pipe would hang.
		_, _ = io.Copy(io.Discard, br)
	}()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	exited := p.exited
	var got first
wait:
	for {
		select {
		case got = <-lines:
			break wait
		case <-exited:
			// Its stdout ends too, unless a child holds it: then the
			// plugin exited during start-up.
			exited = nil
			select {
			case got = <-lines:
				break wait
			case <-time.After(100 * time.Millisecond):
				return fail(true, "it exited during start-up")
			}
		case <-timer.C:
			return fail(true, "it did not start within %v (%s)", timeout, mca.PluginTimeoutName)
		}
	}
	if !got.ok {
		// It printed nothing: why is in its stderr, read to its end.
		p.kill()
		stderr := errTail.String()
		switch note := stderrNote(stderr); {
		case strings.Contains(stderr, "This binary is a plugin"):
			return nil, mpierr.Errorf(mpierr.ErrComponentNotFound, "it refused the handshake cookie: it is a go-plugin binary, but not built with gompi's plugin SDK (mca/plugin/sdk)")
		case note != "":
			return nil, mpierr.Errorf(mpierr.ErrComponentNotFound, "it exited during start-up, before the go-plugin handshake%s", note)
		default:
			return nil, mpierr.Errorf(mpierr.ErrComponentNotFound, "not a plugin: it printed no go-plugin handshake")
		}
	}
	hs, err := parseHandshake(got.line)
	if err != nil {
		return fail(false, "%v", err)
	}
	if hs.api != api {
		return fail(false, "built for %s API %d.x, but this gompi has %s API %d.x (major versions must match)", framework, hs.api, framework, api)
	}
	nc, err := net.DialTimeout(hs.network, hs.addr, timeout)
	if err != nil {
		return fail(true, "it could not be reached at %s %s: %v", hs.network, hs.addr, err)
	}
	if p.conn, err = newH2Conn(nc, timeout); err != nil {
		return fail(true, "it could not be reached at %s %s: %v", hs.network, hs.addr, err)
	}
	// A Go plugin's later writes to os.Stdout and os.Stderr go to pipes
	// inside it that only this stream drains: unread, they would block the
	// plugin. A plugin without the service (one in another language)
	// answers UNIMPLEMENTED, and its stderr is the pipe alone.
	if _, err := p.conn.open(stdioMethod, nil, 0, p.stdio); err != nil {
		return fail(true, "it could not be reached at %s %s: %v", hs.network, hs.addr, err)
	}
	return p, nil
}

// readStderr copies the plugin's stderr pipe into its log, to the end.
func (p *Process) readStderr(r *os.File) {
	defer close(p.errDone)
	defer r.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		_, _ = p.lines[0].Write(buf[:n])
		if err != nil {
			return
		}
	}
}

// stdio takes one message of go-plugin's stdio stream: the plugin's
// stderr joins its log; its stdout is thrown away, as from the pipe.
func (p *Process) stdio(msg []byte) error {
	p.lastStdio.Store(time.Now().UnixNano())
	channel, data, err := stdioData(msg)
	if err != nil {
		return err
	}
	if channel == 2 {
		_, _ = p.lines[1].Write(data)
	}
	return nil
}

// Exited reports whether the plugin's process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Path is the plugin's executable.
func (p *Process) Path() string { return p.path }

// Query asks the plugin a framework-specific question. A plugin that does
// not answer within mca_base_plugin_timeout, or that dies, is stopped, and
// every later call returns the same error.
func (p *Process) Query(req []byte) ([]byte, error) { return p.call("Query", req) }

func (p *Process) call(method string, in []byte) ([]byte, error) {
	p.mu.Lock()
	broken := p.broken
	p.mu.Unlock()
	if broken != nil {
		return nil, broken
	}
	out, err := p.conn.unary("/"+ServiceName+"/"+method, encodeBytesValue(in), p.timeout)
	if err == nil {
		var v []byte
		if v, err = decodeBytesValue(out); err == nil {
			return v, nil
		}
	}
	var rerr *rpcError
	var why string
	switch {
	case errors.Is(err, errCallTimeout):
		why = fmt.Sprintf("no answer to %s within %v (%s)", method, p.timeout, mca.PluginTimeoutName)
	case errors.As(err, &rerr) && rerr.code == grpcUnknown:
		// The plugin answered with an error of its own: it is alive and
		// may be asked again.
		return nil, mpierr.Errorf(mpierr.ErrComponentNotFound, "plugin %s: %s: %s", p.path, method, rerr.msg)
	default:
		p.waitExit(200 * time.Millisecond)
		why = fmt.Sprintf("it failed during %s (%v)", method, err)
		if p.Exited() {
			why = fmt.Sprintf("it exited during %s", method)
		}
	}
	// kill returns once the plugin's stderr has been read to its end.
	p.kill()
	err = mpierr.Errorf(mpierr.ErrComponentNotFound, "plugin %s: %s%s; stopped it", p.path, why, stderrNote(p.stderr.String()))
	p.mu.Lock()
	p.broken = err
	p.mu.Unlock()
	return nil, err
}

func (p *Process) waitExit(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
	}
}

// kill ends a plugin that misbehaved at once, rather than through the
// graceful stop, which would wait for a hung call.
func (p *Process) kill() {
	if p.proc != nil && !p.Exited() {
		_ = p.proc.Kill()
	}
	p.end()
}

// end, once the process is gone or going, closes the connection, waits
// for the process and the end of its output, flushes its last stderr line
// and removes its socket's directory.
func (p *Process) end() {
	p.endOnce.Do(func() {
		if p.conn != nil {
			p.conn.close()
		}
		if p.proc != nil {
			<-p.exited
			t := time.NewTimer(pipeGrace)
			defer t.Stop()
			for _, c := range []chan struct{}{p.errDone, p.outDone} {
				select {
				case <-c:
				case <-t.C:
				}
			}
		}
		p.lines[0].Flush()
		p.lines[1].Flush()
		p.sock.remove()
	})
}

// awaitQuietStdio waits, until deadline, until the stdio stream has been
// silent for stdioQuiet, counted from the call at the earliest.
func (p *Process) awaitQuietStdio(deadline time.Time) {
	from := time.Now().UnixNano()
	for {
		idle := time.Since(time.Unix(0, max(p.lastStdio.Load(), from)))
		if idle >= stdioQuiet || !time.Now().Before(deadline) {
			return
		}
		time.Sleep(min(stdioQuiet-idle, time.Until(deadline)))
	}
}

// Stop ends the plugin: once its stdio stream has been quiet for
// stdioQuiet, it is asked to exit (go-plugin's GRPCController.Shutdown) and
// killed if it does not within two seconds.
func (p *Process) Stop() {
	p.mu.Lock()
	broken := p.broken
	p.mu.Unlock()
	if broken != nil || p.conn == nil {
		p.kill()
		return
	}
	p.awaitQuietStdio(time.Now().Add(stopGrace))
	// The plugin may close the connection before it answers: either way
	// it is stopping.
	_, _ = p.conn.unary(shutdownMethod, nil, stopGrace)
	p.conn.close()
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		p.log.Debug("plugin did not exit when asked; killing it", "path", p.path)
	}
	p.kill()
}
