package mca

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
)

// filter is a parsed selection parameter.
type filter struct {
	exclude bool
	names   map[string]bool
	value   params.Value
}

// ParseSelection parses the items of a selection parameter: "a,b" means only
// a and b, "^a,b" all but a and b (a "^" on later items of an exclusion is
// tolerated), no items means all. Mixing the two forms ("a,^b") is an error,
// and so are an empty name and "^^a". Its errors are of class
// ErrUnsupportedParam.
func ParseSelection(items []string) (exclude bool, names []string, err error) {
	for i, it := range items {
		neg := strings.HasPrefix(it, "^")
		// "^ a" excludes a: the list's items are trimmed, so " a" would
		// name no component and print back as "a".
		name := strings.TrimSpace(strings.TrimPrefix(it, "^"))
		switch {
		case i == 0:
			exclude = neg
		case neg && !exclude:
			return false, nil, mpierr.Errorf(mpierr.ErrUnsupportedParam, "%q mixes included and excluded components; write either \"a,b\" (only these) or \"^a,b\" (all but these)", strings.Join(items, ","))
		}
		if name == "" || strings.HasPrefix(name, "^") {
			return false, nil, mpierr.Errorf(mpierr.ErrUnsupportedParam, "%q is not a component name; write \"a,b\" (only these) or \"^a,b\" (all but these)", it)
		}
		names = append(names, name)
	}
	return exclude, names, nil
}

// parseFilter reads and checks a framework's selection parameter: an included
// name that no component has is an error; an excluded one a warning (users
// exclude Open MPI's component names out of habit).
func (b *Base) parseFilter(fw *Framework) (filter, []string, error) {
	v := b.Lookup(fw.Name)
	exclude, names, err := ParseSelection(v.List())
	if err != nil {
		return filter{}, nil, selectionError(fw.Name, v, "%v", err)
	}
	known := b.cat.componentNames(fw.Name)
	isKnown := map[string]bool{}
	for _, n := range known {
		isKnown[n] = true
	}
	f := filter{exclude: exclude, names: map[string]bool{}, value: v}
	var warnings []string
	for _, n := range names {
		if isKnown[n] {
			f.names[n] = true
			continue
		}
		if !exclude {
			return filter{}, nil, mpierr.Wrap(mpierr.ErrComponentNotFound, selectionError(fw.Name, v,
				"there is no %s component %q; %s components: %s", fw.Name, n, fw.Name, quoteList(known)))
		}
		warnings = append(warnings, fmt.Sprintf("%s = %q (source: %s) excludes %q, which is not a %s component (known: %s)",
			fw.Name, v.String(), v.Source, n, fw.Name, quoteList(known)))
	}
	return f, warnings, nil
}

// excludedBy says why the filter removes a component, or "" when it keeps it.
func (f filter) excludedBy(fw, name string) string {
	if len(f.value.List()) == 0 || f.exclude != f.names[name] {
		return ""
	}
	return fmt.Sprintf("%s (by %s = %q, source: %s)", name, fw, f.value.String(), f.value.Source)
}

// Selected is one component chosen by Select, with its module.
type Selected[M any] struct {
	Entry    *Entry
	Priority int
	Module   M
}

// Select chooses a framework's components for this Base. Candidates are the
// framework's components that its selection parameter keeps; each is opened
// (once per Base) and queried. Decliners are logged at verbosity 10 with
// their reason; any other error from Open or Query fails the selection. The
// rest are ordered by priority, highest first (<fw>_<comp>_priority, when
// set, replaces the queried one; ties go by name). A single-select framework
// keeps the first and closes the others; a multi-select one keeps all. When
// nothing remains and the framework does not allow that, the error lists what
// was excluded and what declined, and why.
//
// query is the framework's typed call of its components' Query method.
func Select[M any](b *Base, fw *Framework, query func(c Component) (priority int, module M, err error)) ([]Selected[M], error) {
	sel, _, err := SelectReport(b, fw, query)
	return sel, err
}

// Report says which components a selection left out and why, for a
// framework that explains an incomplete result itself (coll names the
// operations nobody fills).
type Report struct {
	// Excluded are the components the selection parameter removed, each
	// with the parameter; Declined those that declined, with the reason.
	Excluded, Declined []string
}

// SelectReport is Select, with what it left out.
func SelectReport[M any](b *Base, fw *Framework, query func(c Component) (priority int, module M, err error)) ([]Selected[M], Report, error) {
	if b.cat.Framework(fw.Name) != fw {
		panic(fmt.Sprintf("mca: framework %s is not in this Base's catalogue", fw.Name))
	}
	log := b.Logger(fw.Name)
	f := b.filters[fw.Name]
	var excluded, declined []string
	var chosen []Selected[M]
	for _, e := range b.cat.Components(fw.Name) {
		name := e.Info.Name
		if why := f.excludedBy(fw.Name, name); why != "" {
			excluded = append(excluded, why)
			log.Log(VerboseComponent, "component excluded", "component", name, "by", fw.Name+"="+f.value.String())
			continue
		}
		if err := b.open(e); err != nil {
			if !IsDeclined(err) {
				return nil, Report{}, fmt.Errorf("opening %s component %s: %w", fw.Name, name, err)
			}
			declined = append(declined, fmt.Sprintf("%s (%v)", name, trimDecline(err)))
			log.Log(VerboseComponent, "component declined at open", "component", name, "reason", trimDecline(err))
			continue
		}
		log.Log(VerboseComponent, "querying component", "component", name)
		prio, mod, err := query(e.Component)
		if err != nil {
			if !IsDeclined(err) {
				return nil, Report{}, fmt.Errorf("querying %s component %s: %w", fw.Name, name, err)
			}
			declined = append(declined, fmt.Sprintf("%s (%v)", name, trimDecline(err)))
			log.Log(VerboseComponent, "component declined", "component", name, "reason", trimDecline(err))
			continue
		}
		if e.Priority != nil {
			if pv := b.Get(e.Priority); pv.Source.Kind != params.FromDefault {
				log.Log(VerboseComponent, "priority set by parameter", "component", name,
					"queried", prio, "parameter", e.Priority.Name(), "priority", pv.Int(), "source", pv.Source.String())
				prio = int(pv.Int())
			}
		}
		log.Log(VerboseComponent, "component available", "component", name, "priority", prio)
		chosen = append(chosen, Selected[M]{Entry: e, Priority: prio, Module: mod})
	}
	sort.SliceStable(chosen, func(i, j int) bool {
		if chosen[i].Priority != chosen[j].Priority {
			return chosen[i].Priority > chosen[j].Priority
		}
		return chosen[i].Entry.Info.Name < chosen[j].Entry.Info.Name
	})
	rep := Report{Excluded: excluded, Declined: declined}
	if len(chosen) == 0 {
		if fw.AllowEmpty {
			log.Log(VerboseComponent, "no component selected; the framework allows that")
			return nil, rep, nil
		}
		return nil, rep, mpierr.Errorf(mpierr.ErrComponentNotFound,
			"no component of the %s framework can be used; excluded: %s; declined: %s; components: %s",
			fw.Name, quoteList(excluded), quoteList(declined), quoteList(b.cat.componentNames(fw.Name)))
	}
	if fw.Selection == SingleSelect {
		var errs []error
		for _, s := range chosen[1:] {
			if err := b.closeEntry(s.Entry); err != nil {
				errs = append(errs, err)
			}
		}
		chosen = chosen[:1]
		if err := errors.Join(errs...); err != nil {
			return nil, rep, err
		}
	}
	for _, s := range chosen {
		log.Log(VerboseComponent, "selected component", "component", s.Entry.Info.Name, "priority", s.Priority)
	}
	return chosen, rep, nil
}

// trimDecline drops the ": component declined" suffix that ErrDeclined adds,
// leaving the component's reason.
func trimDecline(err error) string {
	return strings.TrimSuffix(err.Error(), ": "+ErrDeclined.Error())
}
