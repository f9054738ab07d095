// Package tcp is the TCP BTL (placeholder: declines until built).
package tcp

import (
	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/rte"
)

// Component is the tcp BTL component.
type Component struct{}

// Info describes the component.
func (c *Component) Info() mca.Info {
	return mca.Info{Framework: "btl", Name: "tcp", Version: mca.GompiVersion, API: btl.Framework.API}
}

// Register declares the component's parameters.
func (c *Component) Register(r *mca.Registrar) {}

// Query declines: the component is not built yet.
func (c *Component) Query(b *mca.Base, rt *rte.Runtime) (btl.Module, error) {
	return nil, mca.Decline("not implemented yet")
}
