// Package collhost is the coll framework's host side of plugin
// components: the component that stands for a coll plugin (it asks the
// plugin for a schedule per communicator, validates it, caches it and runs
// it natively), and the wire both sides share. Importing it
// (components/builtin does) makes coll plugins loadable; it links no
// go-plugin, gRPC or protobuf code. A coll plugin's main calls
// collplugin.Serve.
package collhost

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/coll/schedule"
	"github.com/gompi/gompi/mpierr"
)

// Request is the host's question: the communicator a rank is setting up.
type Request struct {
	Size int `json:"size"`
	Rank int `json:"rank"`
}

// Reply is the plugin's answer: the operations it fills, each with its
// schedule in wire form; Declined says why when it fills none.
type Reply struct {
	Schedules map[string][]byte `json:"schedules,omitempty"`
	Declined  string            `json:"declined,omitempty"`
}

var opByName = func() map[string]coll.Op {
	m := map[string]coll.Op{}
	for _, op := range coll.Ops() {
		m[op.String()] = op
	}
	return m
}()

// ParseReply reads a plugin's answer for rank of size and validates every
// schedule in it: a schedule for an operation that schedules cannot
// implement (schedule.Fillable: one that depends on a call's root, counts
// or displacements) refuses the reply, as a schedule that does not
// validate does. It never panics, whatever the bytes.
func ParseReply(b []byte, size, rank int) (map[coll.Op]*schedule.Schedule, string, error) {
	var r Reply
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, "", mpierr.Errorf(mpierr.ErrArg, "coll plugin reply: not JSON: %v", err)
	}
	// In a fixed order, so that a reply with several faults is reported
	// the same way every time.
	for _, name := range slices.Sorted(maps.Keys(r.Schedules)) {
		if _, ok := opByName[name]; !ok {
			return nil, "", mpierr.Errorf(mpierr.ErrArg, "coll plugin reply: unknown operation %q", name)
		}
	}
	out := map[coll.Op]*schedule.Schedule{}
	for _, op := range coll.Ops() {
		name := op.String()
		wire, ok := r.Schedules[name]
		if !ok {
			continue
		}
		s, err := schedule.Decode(wire)
		if err != nil {
			return nil, "", fmt.Errorf("coll plugin reply, %s: %w", name, err)
		}
		if err := s.Validate(op, size, rank); err != nil {
			return nil, "", fmt.Errorf("coll plugin reply: %w", err)
		}
		out[op] = s
	}
	return out, r.Declined, nil
}
