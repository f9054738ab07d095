// Package plugin runs gompi components in processes of their own: the
// host side, which finds the executables named
// gompi-<framework>-<component> on mca_base_component_path, starts them,
// asks them what they are and stops them. The guest SDK, which a plugin's
// main calls, is package sdk (mca/plugin/sdk): plugins are
// hashicorp/go-plugin servers over gRPC.
//
// The host speaks that wire itself (client.go, h2.go): go-plugin's
// handshake, and unary gRPC calls over HTTP/2 on the plugin's socket, with
// no go-plugin, gRPC or protobuf package linked. Every gompi program links
// this package; those packages' initialisation cost milliseconds of every
// start and their code tripled a rank binary's size, for the rare job that
// names a plugin.
//
// A call costs tens of microseconds, so a plugin is consulted at
// set-up only: it describes itself once (name, versions, parameters), is
// opened once per instance with that instance's parameter values, and
// answers framework-specific queries (a coll plugin: a schedule per
// communicator and operation) that the host caches and runs natively. The
// framework-specific halves live with their frameworks
// (frameworks/coll/collhost) and plug in here with RegisterAdapter.
//
// The wire is gRPC with a service of three methods whose messages are
// protobuf BytesValues: Describe and Open carry JSON, Query carries the
// framework's own encoding. plugin.proto is its schema, for plugins in
// other languages, and docs/plugin-wire.md describes the rest (the
// go-plugin handshake, the JSON, a coll schedule's binary form); the tests
// check that the host's calls, the SDK's service and the .proto agree.
// Everything the host reads from a plugin goes through a parser that
// returns errors (and is fuzzed): its handshake line, the HTTP/2 frames
// and gRPC messages on its socket, its answers, and its stderr.
package plugin

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sync"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
)

// The handshake cookie keeps a plugin from serving when it is run by hand
// or by another program: the host sets CookieKey=CookieValue in the
// plugin's environment. The protocol version is the framework's API major
// version, set per plugin.
const (
	CookieKey   = "GOMPI_PLUGIN_COOKIE"
	CookieValue = "d8f1c0b2-gompi-mca-plugin-v1"
)

// ServiceName is the gRPC service of plugin.proto.
const ServiceName = "gompi.plugin.v1.Component"

// MaxMessage bounds every message between host and plugin, both ways: a
// schedule for thousands of ranks fits; a runaway plugin does not exhaust
// the host.
const MaxMessage = 64 << 20

// Description is what a plugin says about itself when asked.
type Description struct {
	Framework string      `json:"framework"`
	Name      string      `json:"name"`
	Version   [3]int      `json:"version"`
	API       [3]int      `json:"api"`
	Priority  int         `json:"priority"`
	Params    []ParamSpec `json:"params,omitempty"`
}

// ParamSpec is one parameter a plugin declares: params.Def in wire form.
type ParamSpec struct {
	Name    string     `json:"name"`
	Type    string     `json:"type"`
	Default string     `json:"default,omitempty"`
	Help    string     `json:"help,omitempty"`
	Level   int        `json:"level"`
	Values  []EnumSpec `json:"values,omitempty"`
	Range   *[2]int64  `json:"range,omitempty"`
}

// EnumSpec is a named value of an enum parameter.
type EnumSpec struct {
	Value int64  `json:"value"`
	Name  string `json:"name"`
}

// Info is the mca.Info the description declares.
func (d *Description) Info() mca.Info {
	return mca.Info{
		Framework: d.Framework, Name: d.Name,
		Version:  mca.Version{Major: d.Version[0], Minor: d.Version[1], Patch: d.Version[2]},
		API:      mca.Version{Major: d.API[0], Minor: d.API[1], Patch: d.API[2]},
		Priority: d.Priority,
	}
}

var (
	typeByName = map[string]params.Type{"bool": params.Bool, "int": params.Int, "uint": params.Uint,
		"size": params.Size, "string": params.String, "enum": params.Enum, "list": params.List}
	// nameRE is a component's or a parameter's name; compiled when first
	// used (see fileName).
	nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_]*$`) })
)

// Limits on a description, so that a broken plugin cannot flood the host.
const (
	maxParams    = 256
	maxHelp      = 4096
	maxEnumItems = 256
)

// Defs are the description's parameters as params.Def, for registration.
func (d *Description) Defs() []params.Def {
	var defs []params.Def
	for _, p := range d.Params {
		def := params.Def{Name: p.Name, Type: typeByName[p.Type], Default: p.Default, Help: p.Help, Level: p.Level}
		for _, v := range p.Values {
			def.Values = append(def.Values, params.EnumValue{Value: v.Value, Name: v.Name})
		}
		if p.Range != nil {
			def.Range = &params.Range{Min: p.Range[0], Max: p.Range[1]}
		}
		defs = append(defs, def)
	}
	return defs
}

// ParseDescription reads a plugin's description and checks it against
// what its file name promises (framework and component) and against the
// rules a registered parameter must follow. Its errors say what is wrong.
func ParseDescription(b []byte, framework, name string) (*Description, error) {
	bad := func(format string, a ...any) (*Description, error) {
		return nil, mpierr.Errorf(mpierr.ErrArg, "description: "+format, a...)
	}
	var d Description
	if err := json.Unmarshal(b, &d); err != nil {
		return bad("not JSON: %v", err)
	}
	switch {
	case d.Framework != framework || d.Name != name:
		return bad("it calls itself %s/%s, but its file name says %s/%s", d.Framework, d.Name, framework, name)
	case !nameRE().MatchString(d.Name) || d.Name == "base" || d.Name == "all":
		return bad("component name %q: lower case letters, digits and '_', not base or all", d.Name)
	case len(d.Params) > maxParams:
		return bad("%d parameters: accepted: at most %d", len(d.Params), maxParams)
	}
	prefix := framework + "_" + name + "_"
	seen := map[string]bool{prefix + "priority": true}
	for _, p := range d.Params {
		at := func(format string, a ...any) (*Description, error) {
			return bad("parameter %q: "+format, append([]any{p.Name}, a...)...)
		}
		t, ok := typeByName[p.Type]
		switch {
		case !nameRE().MatchString(p.Name) || len(p.Name) <= len(prefix) || p.Name[:len(prefix)] != prefix:
			return at("a name is lower case letters, digits and '_' starting with %q", prefix)
		case seen[p.Name]:
			return at("declared twice, or the reserved priority parameter")
		case !ok:
			return at("type %q: accepted: bool, int, uint, size, string, enum, list", p.Type)
		case p.Level < 1 || p.Level > 9:
			return at("level %d: accepted: 1 to 9", p.Level)
		case len(p.Help) > maxHelp || len(p.Values) > maxEnumItems:
			return at("help or values too long")
		case t == params.Enum && len(p.Values) == 0:
			return at("an enum needs values")
		case len(p.Values) > 0 && t != params.Enum && t != params.Int && t != params.List:
			return at("values are for enum, int and list parameters")
		case p.Range != nil && (t != params.Int || p.Range[0] > p.Range[1]):
			return at("a range is for int parameters, with min <= max")
		}
		seen[p.Name] = true
		names, nums := map[string]bool{}, map[int64]bool{}
		for _, v := range p.Values {
			if v.Name == "" || names[v.Name] || (t == params.Enum && nums[v.Value]) {
				return at("value %d:%q is empty or repeated", v.Value, v.Name)
			}
			names[v.Name], nums[v.Value] = true, true
		}
	}
	return &d, nil
}

// OpenRequest is what Open carries: the instance's values of the plugin's
// parameters, as text.
type OpenRequest struct {
	Params map[string]string `json:"params"`
}

func (d *Description) String() string {
	return fmt.Sprintf("%s/%s v%d.%d.%d (API %d.%d.%d)", d.Framework, d.Name,
		d.Version[0], d.Version[1], d.Version[2], d.API[0], d.API[1], d.API[2])
}
