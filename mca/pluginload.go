package mca

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
)

// The parameters of plugin loading, in the mca project.
const (
	ComponentPathName = "mca_base_component_path"
	PluginTimeoutName = "mca_base_plugin_timeout"
)

func pluginParamDefs() []params.Def {
	return []params.Def{
		{
			Name: ComponentPathName, Type: params.String, Level: 2, Scope: params.ScopeAllEq,
			Help: "Colon-separated directories searched for plugin components: executables named " +
				"gompi-<framework>-<component>. Read once per process, by its first instance; empty loads no plugin",
		},
		{
			Name: PluginTimeoutName, Type: params.Int, Level: 4, Default: "10", Range: &params.Range{Min: 1, Max: 3600},
			Help: "Seconds a plugin may take to start, or to answer one question (its description, a query for a " +
				"communicator); a plugin that takes longer is stopped and skipped",
		},
	}
}

// Skipped is a plugin the loader found and did not add, with the reason.
type Skipped struct {
	Path   string
	Reason string
}

func (s Skipped) String() string { return fmt.Sprintf("plugin %s skipped: %s", s.Path, s.Reason) }

// PluginLoader finds the plugins in dirs, registers the good ones with
// cat.RegisterPlugin and returns the others with the reason. timeout bounds
// each plugin's start and each question to it; log is the mca logger.
type PluginLoader func(cat *Catalog, dirs []string, timeout time.Duration, log hclog.Logger) []Skipped

// The loader is part of the process's component machinery, like the
// frameworks: mca/plugin installs it from its init function, so that mca
// need not import go-plugin.
var (
	loaderMu     sync.Mutex
	pluginLoader PluginLoader
)

// SetPluginLoader installs the function that loads plugin components. Call
// it from an init function; mca/plugin does.
func SetPluginLoader(l PluginLoader) {
	loaderMu.Lock()
	pluginLoader = l
	loaderMu.Unlock()
}

// SplitComponentPath splits a colon-separated path, dropping empty items.
func SplitComponentPath(path string) []string {
	var dirs []string
	for _, d := range strings.Split(path, ":") {
		if d != "" {
			dirs = append(dirs, filepath.Clean(d))
		}
	}
	return dirs
}

// loadPlugins prepares the catalogue for a Base whose parameters come from
// src: the first Base loads the plugins on its component path, before the
// catalogue is frozen, so that their parameters can be resolved with the
// rest. Later Bases must name the same path: plugins are loaded once per
// process, as in Open MPI.
func (c *Catalog) loadPlugins(src params.Sources, root hclog.Logger) error {
	c.loadMu.Lock()
	defer c.loadMu.Unlock()
	pre, _ := params.Resolve(c.reg, src) // bad values are reported by the real resolution
	pathParam, _ := c.reg.Lookup(ComponentPathName)
	path := pre.Get(pathParam)
	if c.loaded {
		if path.Str() != c.loadedPath {
			return mpierr.Errorf(mpierr.ErrUnsupportedParam,
				"%s = %q (source: %s): this process loaded its plugins from %q already; the path is read once per process",
				ComponentPathName, path.Str(), path.Source, c.loadedPath)
		}
		return nil
	}
	c.loaded = true
	c.mu.RLock()
	frozen := c.frozen
	c.mu.RUnlock()
	dirs := SplitComponentPath(path.Str())
	if frozen {
		// The catalogue was frozen without a Base (a tool or test did it):
		// plugins can no longer be added.
		if len(dirs) > 0 {
			return mpierr.Errorf(mpierr.ErrUnsupportedParam,
				"%s = %q (source: %s): the component catalogue was frozen before plugins could be loaded",
				ComponentPathName, path.Str(), path.Source)
		}
		return nil
	}
	c.loadedPath = path.Str()
	loaderMu.Lock()
	load := pluginLoader
	loaderMu.Unlock()
	if len(dirs) == 0 {
		return nil
	}
	if load == nil {
		return mpierr.Errorf(mpierr.ErrUnsupportedParam,
			"%s = %q (source: %s): this program cannot load plugins (it was built with -tags gompi_noplugins, or without github.com/gompi/gompi/mca/plugin)",
			ComponentPathName, path.Str(), path.Source)
	}
	timeoutParam, _ := c.reg.Lookup(PluginTimeoutName)
	timeout := time.Duration(pre.Get(timeoutParam).Int()) * time.Second
	verboseParam, _ := c.reg.Lookup("mca_base_verbose")
	log := root.Named("mca").Named("plugin")
	// The first instance goes on with the processes the loader started, so
	// their logger keeps the plugins' warnings; the loader's report
	// (Skipped) says why a plugin failed.
	if v := int(pre.Get(verboseParam).Int()); v >= VerboseComponent {
		log.SetLevel(hclogLevel(v))
	} else {
		log.SetLevel(hclog.Warn)
	}
	c.skipped = load(c, dirs, timeout, log)
	return nil
}

// Skipped returns the plugins the catalogue's loader found and did not add.
func (c *Catalog) Skipped() []Skipped {
	c.loadMu.Lock()
	defer c.loadMu.Unlock()
	return append([]Skipped(nil), c.skipped...)
}
