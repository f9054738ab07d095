// Package shm is the shared-memory BTL (placeholder: declines until built).
package shm

import (
	"os"
	"path/filepath"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/rte"
)

// Dir is where the segments live.
const Dir = "/dev/shm"

// Component is the shm BTL component.
type Component struct{}

// Info describes the component.
func (c *Component) Info() mca.Info {
	return mca.Info{Framework: "btl", Name: "shm", Version: mca.GompiVersion, API: btl.Framework.API}
}

// Register declares the component's parameters.
func (c *Component) Register(r *mca.Registrar) {}

// Query declines: the component is not built yet.
func (c *Component) Query(b *mca.Base, rt *rte.Runtime) (btl.Module, error) {
	return nil, mca.Decline("not implemented yet")
}

// RemoveJobFiles removes every segment file of a job, for launchers to call
// when the job has ended, whatever happened to its ranks.
func RemoveJobFiles(jobID string) error {
	files, err := filepath.Glob(filepath.Join(Dir, "gompi-"+jobID+"-*"))
	if err != nil {
		return err
	}
	for _, f := range files {
		os.Remove(f)
	}
	return nil
}
