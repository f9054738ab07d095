package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
)

func init() { mca.SetPluginLoader(load) }

// Adapter makes a framework's component out of a described plugin. The
// framework's plugin package (frameworks/coll/collplugin) provides it.
type Adapter func(h *Handle) (mca.Component, error)

var (
	adaptersMu sync.Mutex
	adapters   = map[string]Adapter{}
)

// RegisterAdapter makes plugins of a framework loadable. Call it from an
// init function.
func RegisterAdapter(framework string, a Adapter) {
	adaptersMu.Lock()
	defer adaptersMu.Unlock()
	if adapters[framework] != nil {
		panic("plugin: a second adapter for framework " + framework)
	}
	adapters[framework] = a
}

func adapter(framework string) (Adapter, []string) {
	adaptersMu.Lock()
	defer adaptersMu.Unlock()
	var known []string
	for fw := range adapters {
		known = append(known, fw)
	}
	sort.Strings(known)
	return adapters[framework], known
}

// Handle is a plugin the loader found and that described itself well: its
// file, its description, and what is needed to start it again, once per
// instance that opens it.
type Handle struct {
	Path string
	Desc *Description
	api  int // the handshake's protocol version: the framework's API major

	// spare is the process that described the plugin, kept for the first
	// instance that opens it (a start costs milliseconds); stopped if none
	// takes it within the plugin timeout.
	mu    sync.Mutex
	spare *Process
}

// takeSpare returns the process kept from the description, if any.
func (h *Handle) takeSpare() *Process {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.spare
	h.spare = nil
	return p
}

// fileName is gompi-<framework>-<component>.
var fileName = regexp.MustCompile(`^gompi-([a-z][a-z0-9]*)-([a-z][a-z0-9_]*)$`)

// load is the catalogue's plugin loader: it finds the candidates in dirs,
// describes them in parallel (each in a process started and stopped for
// that), and registers the good ones in file-name order.
func load(cat *mca.Catalog, dirs []string, timeout time.Duration, log hclog.Logger) []mca.Skipped {
	var skipped []mca.Skipped
	skip := func(path, format string, a ...any) {
		skipped = append(skipped, mca.Skipped{Path: path, Reason: fmt.Sprintf(format, a...)})
	}
	type candidate struct {
		path, framework, name string
		api                   int
		adapt                 Adapter
		desc                  *Description
		proc                  *Process
		err                   error
	}
	var cands []*candidate
	seen := map[string]string{} // framework/name → first path
	for _, dir := range dirs {
		ents, err := os.ReadDir(dir)
		if err != nil {
			skip(dir, "cannot read the directory (%s): %v", mca.ComponentPathName, err)
			continue
		}
		for _, ent := range ents {
			if !strings.HasPrefix(ent.Name(), "gompi-") {
				continue
			}
			path := filepath.Join(dir, ent.Name())
			m := fileName.FindStringSubmatch(ent.Name())
			if m == nil {
				skip(path, "its name is not gompi-<framework>-<component> (lower case letters, digits, and '_' in the component)")
				continue
			}
			fw, name := m[1], m[2]
			if why := checkFile(path); why != "" {
				skip(path, "%s", why)
				continue
			}
			adapt, known := adapter(fw)
			f := cat.Framework(fw)
			switch {
			case f == nil:
				skip(path, "this program has no %s framework (frameworks: %s)", fw, strings.Join(cat.FrameworkNames(), ", "))
				continue
			case adapt == nil:
				skip(path, "the %s framework takes no plugins (frameworks that do: %s)", fw, strings.Join(known, ", "))
				continue
			case seen[fw+"/"+name] != "":
				skip(path, "%s/%s was found first in %s", fw, name, seen[fw+"/"+name])
				continue
			}
			seen[fw+"/"+name] = path
			cands = append(cands, &candidate{path: path, framework: fw, name: name, api: f.API.Major, adapt: adapt})
		}
	}
	var wg sync.WaitGroup
	for _, c := range cands {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.desc, c.proc, c.err = describe(c.path, c.framework, c.name, c.api, timeout, log)
		}()
	}
	wg.Wait()
	for _, c := range cands {
		if c.err != nil {
			skip(c.path, "%v", c.err)
			continue
		}
		h := &Handle{Path: c.path, Desc: c.desc, api: c.api, spare: c.proc}
		comp, err := c.adapt(h)
		if err == nil {
			err = cat.RegisterPlugin(comp, c.path)
		}
		if err != nil {
			c.proc.Stop()
			skip(c.path, "%v", err)
			continue
		}
		time.AfterFunc(timeout, func() {
			if p := h.takeSpare(); p != nil {
				p.Stop()
			}
		})
		log.Debug("plugin registered", "path", c.path, "component", c.desc.String())
	}
	return skipped
}

// checkFile says why a file cannot be a plugin, or "" when it may be one:
// a regular executable that only its owner can change (a plugin runs inside
// every job that finds it; one that others can write is theirs to control).
func checkFile(path string) string {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Sprintf("cannot inspect it: %v", err)
	case !st.Mode().IsRegular():
		return fmt.Sprintf("not a regular file (%s)", st.Mode().Type())
	case st.Mode().Perm()&0o111 == 0:
		return fmt.Sprintf("not executable (mode %#o)", st.Mode().Perm())
	case st.Mode().Perm()&0o022 != 0:
		return fmt.Sprintf("group- or world-writable (mode %#o), so others could replace it; chmod go-w it if it is yours", st.Mode().Perm())
	}
	return ""
}

// describe starts a plugin and asks for its description; the process is
// returned running when the description is good, and stopped otherwise.
func describe(path, framework, name string, api int, timeout time.Duration, log hclog.Logger) (*Description, *Process, error) {
	p, err := start(path, framework, api, timeout, log)
	if err != nil {
		return nil, nil, err
	}
	b, err := p.call("Describe", nil)
	if err != nil {
		p.Stop()
		return nil, nil, err
	}
	d, err := ParseDescription(b, framework, name)
	if err != nil {
		p.Stop()
		return nil, nil, err
	}
	return d, p, nil
}

// Process is a running plugin, spoken to through go-plugin.
type Process struct {
	path    string
	timeout time.Duration
	client  *plugin.Client
	rpc     *rpcClient
	stderr  *tail
	lines   [2]*stderrLog // the pipe's and the gRPC stream's, feeding stderr

	mu     sync.Mutex
	broken error // set when a call failed: the process is gone or stopped
}

// Start starts the plugin for instance b and opens it with b's values of
// its parameters.
func (h *Handle) Start(b *mca.Base) (*Process, error) {
	timeout := time.Duration(b.Lookup(mca.PluginTimeoutName).Int()) * time.Second
	p := h.takeSpare()
	if p != nil && p.client.Exited() {
		p.Stop()
		p = nil
	}
	if p != nil {
		p.timeout = timeout
	} else {
		log := b.Logger("mca").HCLog().Named("plugin")
		var err error
		if p, err = start(h.Path, h.Desc.Framework, h.api, timeout, log); err != nil {
			return nil, err
		}
	}
	req := openRequest{Params: map[string]string{}}
	for _, d := range h.Desc.Params {
		req.Params[d.Name] = b.Lookup(d.Name).String()
	}
	body, _ := json.Marshal(req)
	if _, err := p.call("Open", body); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

func start(path, framework string, api int, timeout time.Duration, log hclog.Logger) (*Process, error) {
	cmd := exec.Command(path)
	// The kernel kills the plugin when its host dies (even by kill -9); the
	// guest also watches its parent, for the case where the forking thread
	// ends first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	errTail := &tail{}
	// gompi reads the plugin's stderr itself (stderrLog), under the logger
	// name go-plugin would give it.
	errLog := log.Named(filepath.Base(path))
	lines := [2]*stderrLog{{log: errLog, tail: errTail}, {log: errLog, tail: errTail}}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  cookie,
		VersionedPlugins: map[int]plugin.PluginSet{api: {pluginName: &grpcPlugin{}}},
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           quietLogger{Logger: log},
		StartTimeout:     timeout,
		Stderr:           lines[0],
		// After the handshake a Go plugin's writes to os.Stderr come over
		// the connection (a panic's still come through the pipe).
		SyncStderr: lines[1],
		GRPCDialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(MaxMessage), grpc.MaxCallSendMsgSize(MaxMessage))},
	})
	fail := func(err error) (*Process, error) {
		client.Kill()
		lines[0].Flush()
		lines[1].Flush()
		return nil, mpierr.Errorf(mpierr.ErrComponentNotFound, "%s", startFailure(err, errTail.String(), framework, api, timeout))
	}
	proto, err := client.Client()
	if err != nil {
		return fail(err)
	}
	raw, err := proto.Dispense(pluginName)
	if err != nil {
		return fail(err)
	}
	rc, ok := raw.(*rpcClient)
	if !ok {
		return fail(fmt.Errorf("dispensed %T", raw))
	}
	return &Process{path: path, timeout: timeout, client: client, rpc: rc, stderr: errTail, lines: lines}, nil
}

var apiMismatch = regexp.MustCompile(`Plugin version: (\d+)`)

// startFailure turns go-plugin's start-up errors, which have no types, into
// the reason a user can act on.
func startFailure(err error, stderr, framework string, api int, timeout time.Duration) string {
	msg := err.Error()
	first, _, _ := strings.Cut(msg, "\n")
	switch {
	case strings.Contains(stderr, "This binary is a plugin"):
		return "it refused the handshake cookie: it is a go-plugin binary, but not built with gompi's plugin SDK (mca/plugin)"
	case strings.Contains(msg, "incompatible API version"):
		got := "another"
		if m := apiMismatch.FindStringSubmatch(msg); m != nil {
			got = m[1]
		}
		return fmt.Sprintf("built for %s API %s.x, but this gompi has %s API %d.x (major versions must match)", framework, got, framework, api)
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		return fmt.Sprintf("it did not start within %v (%s)", timeout, mca.PluginTimeoutName) + stderrNote(stderr)
	case strings.Contains(msg, "plugin exited before we could connect"):
		return "it exited during start-up" + stderrNote(stderr)
	case strings.Contains(msg, "Unrecognized remote plugin message"):
		line := strings.TrimSpace(strings.TrimPrefix(first, "Unrecognized remote plugin message:"))
		if line == "" {
			if note := stderrNote(stderr); note != "" {
				return "it exited during start-up, before the go-plugin handshake" + note
			}
			return "not a plugin: it printed no go-plugin handshake"
		}
		return fmt.Sprintf("not a plugin: its first line of output, %q, is not a go-plugin handshake", line)
	}
	return "it could not be started: " + first + stderrNote(stderr)
}

// stderrNote is what the plugin wrote to stderr that says why it failed:
// a panic's first lines when it panicked, else its last lines, leaving out
// go-plugin's own debug chatter.
func stderrNote(stderr string) string {
	var keep []string
	// The tail's first line may start inside a character.
	for _, l := range strings.Split(strings.ToValidUTF8(stderr, "\uFFFD"), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, `{"@level":"debug"`) || strings.HasPrefix(l, `{"@level":"trace"`) {
			continue
		}
		if strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:") {
			keep = keep[:0] // what follows is the cause and its stack
		}
		keep = append(keep, l)
	}
	switch {
	case len(keep) == 0:
		return ""
	case len(keep) > 3 && (strings.HasPrefix(keep[0], "panic:") || strings.HasPrefix(keep[0], "fatal error:")):
		keep = keep[:3]
	case len(keep) > 3:
		keep = keep[len(keep)-3:]
	}
	return "; its stderr: " + strings.Join(keep, " | ")
}

// quietLogger hands go-plugin's own reports of a plugin's exit down to
// debug: the host reports the failure itself, once, with the reason and
// the crash's first lines.
type quietLogger struct{ hclog.Logger }

func (q quietLogger) Error(msg string, args ...any) {
	if msg == "plugin process exited" {
		q.Logger.Debug(msg, args...)
		return
	}
	q.Logger.Error(msg, args...)
}

func (q quietLogger) Warn(msg string, args ...any) {
	if msg == "plugin failed to exit gracefully" {
		q.Logger.Debug(msg, args...)
		return
	}
	q.Logger.Warn(msg, args...)
}

// Named is off: go-plugin reads a plugin's stderr through a named child
// (and its stdio stream's chatter), and a logger that is off makes it copy
// the lines without parsing them.
func (q quietLogger) Named(string) hclog.Logger { return offLogger{hclog.NewNullLogger()} }

func (q quietLogger) With(args ...any) hclog.Logger {
	return quietLogger{Logger: q.Logger.With(args...)}
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
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	out, err := p.rpc.call(ctx, method, in)
	if err == nil {
		return out, nil
	}
	st, _ := status.FromError(err)
	var why string
	switch {
	case ctx.Err() != nil:
		why = fmt.Sprintf("no answer to %s within %v (%s)", method, p.timeout, mca.PluginTimeoutName)
	case st.Code() == codes.Unknown:
		// The plugin answered with an error of its own: it is alive and
		// may be asked again.
		return nil, mpierr.Errorf(mpierr.ErrComponentNotFound, "plugin %s: %s: %s", p.path, method, st.Message())
	default:
		p.waitExit(200 * time.Millisecond)
		why = fmt.Sprintf("it failed during %s (%s)", method, st.Message())
		if p.client.Exited() {
			why = fmt.Sprintf("it exited during %s", method)
		}
	}
	// Kill returns once go-plugin has read all of the plugin's stderr.
	p.kill()
	p.lines[0].Flush()
	p.lines[1].Flush()
	err = mpierr.Errorf(mpierr.ErrComponentNotFound, "plugin %s: %s%s; stopped it", p.path, why, stderrNote(p.stderr.String()))
	p.mu.Lock()
	p.broken = err
	p.mu.Unlock()
	return nil, err
}

func (p *Process) waitExit(d time.Duration) {
	for end := time.Now().Add(d); !p.client.Exited() && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
}

// kill ends a plugin that misbehaved at once, rather than through
// go-plugin's graceful close, which waits for the hung call.
func (p *Process) kill() {
	if rc := p.client.ReattachConfig(); rc != nil && rc.Pid > 0 && !p.client.Exited() {
		_ = syscall.Kill(rc.Pid, syscall.SIGKILL)
	}
	p.client.Kill()
}

// Stop ends the plugin: it is asked to exit and killed if it does not
// within two seconds.
func (p *Process) Stop() {
	p.mu.Lock()
	broken := p.broken
	p.mu.Unlock()
	if broken != nil {
		p.kill()
		return
	}
	p.client.Kill()
}

// tail keeps the last bytes written to it: a plugin's stderr, for the
// reason it failed.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailBytes = 4096

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > tailBytes {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailBytes:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
