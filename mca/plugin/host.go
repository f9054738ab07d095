package plugin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gompi/gompi/mca"
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

// fileName is gompi-<framework>-<component>. Compiled when first used:
// every gompi program links this package, few name a plugin, and start-up
// pays for every package's initialisation.
var fileName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^gompi-([a-z][a-z0-9]*)-([a-z][a-z0-9_]*)$`)
})

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
			m := fileName().FindStringSubmatch(ent.Name())
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

// Start starts the plugin for instance b and opens it with b's values of
// its parameters.
func (h *Handle) Start(b *mca.Base) (*Process, error) {
	timeout := time.Duration(b.Lookup(mca.PluginTimeoutName).Int()) * time.Second
	p := h.takeSpare()
	if p != nil && p.Exited() {
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
	req := OpenRequest{Params: map[string]string{}}
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
