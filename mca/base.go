package mca

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
)

// Options configure a Base.
type Options struct {
	// Catalog is the catalogue to select from; nil means Default().
	Catalog *Catalog
	// Sources are where parameter values come from. Nothing is read from the
	// process environment unless the caller puts it here.
	Sources params.Sources
	// Output receives log lines, warnings and mpi_show_mca_params lines; nil
	// means os.Stderr.
	Output io.Writer
	// Rank, when not negative, is added to every log line.
	Rank int
	// Reporter makes this Base print the once-per-job reports: warnings
	// about unknown or deprecated parameters and mpi_show_mca_params. Rank 0
	// of a job sets it; the other ranks stay quiet.
	Reporter bool
}

// Base is the MCA state of one instance: its parameter values, its loggers,
// and the components it opened. Everything per instance hangs off it, so that
// many instances with different parameters can live in one process.
type Base struct {
	cat      *Catalog
	vals     *params.Values
	root     hclog.Logger
	out      io.Writer
	reporter bool
	loggers  map[string]*Logger
	filters  map[string]filter

	mu     sync.Mutex
	opened map[*Entry]error // Open's result, nil for success
	order  []*Entry         // successfully opened, in order
	closed map[*Entry]bool
}

// NewBase resolves parameter values from o.Sources, reports what the
// reporter should report, and checks every framework's selection parameter.
// It freezes the catalogue. The error joins every bad value, unknown name
// (under mca_base_unknown_params=error) and bad selection it found.
func NewBase(o Options) (*Base, error) {
	cat := o.Catalog
	if cat == nil {
		cat = Default()
	}
	out := o.Output
	if out == nil {
		out = os.Stderr
	}
	root := hclog.New(&hclog.LoggerOptions{
		Output:            out,
		Level:             hclog.Warn,
		IndependentLevels: true,
		DisableTime:       true, // logs diff cleanly between runs
	})
	if o.Rank >= 0 {
		root = root.With("rank", o.Rank)
	}
	if err := cat.loadPlugins(o.Sources, root); err != nil {
		return nil, err
	}
	cat.Freeze()
	b := &Base{
		cat: cat, root: root, out: out, reporter: o.Reporter,
		loggers: map[string]*Logger{}, filters: map[string]filter{},
		opened: map[*Entry]error{}, closed: map[*Entry]bool{},
	}
	vals, err := params.Resolve(cat.Params(), o.Sources)
	b.vals = vals
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	warnings := vals.Warnings()
	unknown, uerr := vals.CheckUnknown()
	warnings = append(warnings, unknown...)
	if uerr != nil {
		errs = append(errs, uerr)
	}

	for _, name := range append(cat.FrameworkNames(), cat.ProjectNames()...) {
		v := b.vals.Get(b.paramOf(name + "_base_verbose"))
		b.loggers[name] = newLogger(root.Named(name), int(v.Int()))
	}
	mcaLog := b.loggers["mca"]
	for _, fw := range cat.Frameworks() {
		f, warns, err := b.parseFilter(fw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		b.filters[fw.Name] = f
		warnings = append(warnings, warns...)
	}
	if o.Reporter {
		for _, s := range cat.Skipped() {
			warnings = append(warnings, s.String())
		}
		for _, w := range warnings {
			mcaLog.Warn(w)
		}
		for _, line := range vals.ShowLines() {
			fmt.Fprintln(out, line)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return b, nil
}

func (b *Base) paramOf(name string) *params.Param {
	p, ok := b.cat.Params().Lookup(name)
	if !ok {
		panic("mca: no parameter " + name)
	}
	return p
}

// Catalog returns the catalogue the Base selects from.
func (b *Base) Catalog() *Catalog { return b.cat }

// Params returns the instance's parameter values.
func (b *Base) Params() *params.Values { return b.vals }

// Get returns the value of a parameter handle.
func (b *Base) Get(p *params.Param) params.Value { return b.vals.Get(p) }

// Lookup returns the value of the parameter of that name; it panics when no
// such parameter is registered, which is a programming error.
func (b *Base) Lookup(name string) params.Value { return b.vals.Get(b.paramOf(name)) }

// Logger returns a framework's or a project's logger. It panics for an
// unknown name.
func (b *Base) Logger(name string) *Logger {
	l, ok := b.loggers[name]
	if !ok {
		panic("mca: no framework or project " + name)
	}
	return l
}

// Reporter reports whether this Base prints the once-per-job reports.
func (b *Base) Reporter() bool { return b.reporter }

// Warn prints a warning if this Base is the job's reporter.
func (b *Base) Warn(msg string, kv ...any) {
	if b.reporter {
		b.loggers["mca"].Warn(msg, kv...)
	}
}

// open calls the component's Open once per Base and remembers the result.
func (b *Base) open(e *Entry) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err, done := b.opened[e]; done {
		return err
	}
	var err error
	if o, ok := e.Component.(Opener); ok {
		err = o.Open(b)
	}
	b.opened[e] = err
	if err == nil {
		b.order = append(b.order, e)
	}
	return err
}

// closeEntry calls Close on a component that opened successfully, once.
func (b *Base) closeEntry(e *Entry) error {
	b.mu.Lock()
	res, wasOpened := b.opened[e]
	if !wasOpened || res != nil || b.closed[e] {
		b.mu.Unlock()
		return nil
	}
	b.closed[e] = true
	b.mu.Unlock()
	if c, ok := e.Component.(Closer); ok {
		if err := c.Close(b); err != nil {
			return fmt.Errorf("closing component %s: %w", e.Info.ID(), err)
		}
	}
	return nil
}

// Close closes every component that is still open, the last opened first.
func (b *Base) Close() error {
	b.mu.Lock()
	order := append([]*Entry(nil), b.order...)
	b.mu.Unlock()
	var errs []error
	for i := len(order) - 1; i >= 0; i-- {
		if err := b.closeEntry(order[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// selectionError makes the error for a selection parameter that cannot be
// honoured.
func selectionError(fw string, v params.Value, format string, a ...any) error {
	return mpierr.Errorf(mpierr.ErrUnsupportedParam, "%s = %q (source: %s): %s",
		fw, v.String(), v.Source, fmt.Sprintf(format, a...))
}

func quoteList(names []string) string {
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}

// Excluded reports why the framework's selection parameter removes the
// component, or "" when it keeps it.
func (b *Base) Excluded(e *Entry) string {
	return b.filters[e.Framework.Name].excludedBy(e.Framework.Name, e.Info.Name)
}
