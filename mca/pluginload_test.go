package mca

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gompi/gompi/mpierr"
)

// The first Base loads plugins from its component path before the
// catalogue freezes, so that their parameters resolve with the rest; a
// later Base that names another path is refused, not silently given the
// first one's plugins; a bad plugin is skipped, reported by the reporter.
func TestPluginLoading(t *testing.T) {
	var calls int
	var gotDirs []string
	SetPluginLoader(func(c *Catalog, dirs []string, timeout time.Duration, log hclog.Logger) []Skipped {
		calls++
		gotDirs = dirs
		if timeout != 7*time.Second {
			t.Errorf("timeout %v, want 7s", timeout)
		}
		if err := c.RegisterPlugin(&fake{fw: "multi", name: "plugged", priority: 5}, "/p/gompi-multi-plugged"); err != nil {
			t.Error(err)
		}
		if err := c.RegisterPlugin(&fake{fw: "multi", name: "old", api: Version{Major: 9}}, "/p/gompi-multi-old"); !errors.Is(err, mpierr.ErrArg) {
			t.Errorf("a plugin of another API major: %v, want ErrArg", err)
		}
		return []Skipped{{Path: "/p/gompi-multi-bad", Reason: "it crashed"}}
	})
	defer SetPluginLoader(nil)

	c := newCatalog()
	b, out, err := newBase(t, c, ComponentPathName, "/p::/q/", PluginTimeoutName, "7", "multi_plugged_knob", "4")
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 || strings.Join(gotDirs, ",") != "/p,/q" {
		t.Errorf("loader called %d times with %q", calls, gotDirs)
	}
	if v := b.Lookup("multi_plugged_knob"); v.Int() != 4 {
		t.Errorf("the plugin's parameter is %v, want 4 from the command line", v)
	}
	es := c.Components("multi")
	if len(es) != 1 || es[0].OriginText() != "plugin (/p/gompi-multi-plugged)" {
		t.Errorf("components %v", es)
	}
	if !strings.Contains(out.String(), "plugin /p/gompi-multi-bad skipped: it crashed") {
		t.Errorf("the reporter did not report the skipped plugin:\n%s", out)
	}
	if _, _, err := newBase(t, c, ComponentPathName, "/p::/q/", PluginTimeoutName, "7"); err != nil || calls != 1 {
		t.Errorf("a second Base with the same path: %v, %d loads", err, calls)
	}
	_, _, err = newBase(t, c, ComponentPathName, "/elsewhere")
	if !errors.Is(err, mpierr.ErrUnsupportedParam) || !strings.Contains(err.Error(), "read once per process") {
		t.Errorf("a second Base with another path: %v", err)
	}
}

// A program without a loader (it does not link mca/plugin) says so when
// asked for plugins, rather than ignoring the path.
func TestNoPluginLoader(t *testing.T) {
	_, _, err := newBase(t, newCatalog(), ComponentPathName, "/p")
	if !errors.Is(err, mpierr.ErrUnsupportedParam) || !strings.Contains(err.Error(), "cannot load plugins") {
		t.Errorf("got %v", err)
	}
}
