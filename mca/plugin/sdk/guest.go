// Package sdk is the guest side of gompi's plugins: Serve, which a
// plugin's main calls. It serves the plugin over hashicorp/go-plugin and
// gRPC, which the host (package plugin, linked into every gompi program)
// speaks without linking them; this package is for plugin binaries only.
// A framework wraps it for its plugins (collplugin.Serve), so a plugin
// author rarely calls it directly.
package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mca/plugin"
	"github.com/gompi/gompi/params"
)

// Guest is what a plugin serves: its description and its answer to the
// framework's queries. Framework packages wrap it (collplugin.Serve); a
// plugin author rarely fills it by hand.
type Guest struct {
	// Info names the component; Info.API must be the framework API the
	// plugin was built against (its major number is the handshake's
	// protocol version).
	Info mca.Info
	// Params are the component's parameters. Their names start with
	// "<framework>_<component>_"; the host registers them, so that --mca
	// and parameter files set them and ompi_info shows them.
	Params []params.Def
	// Query answers one framework-specific question, given the instance's
	// parameter values by name, as text. A returned error reaches the host
	// as a failed query (the host's framework decides what that means).
	Query func(ctx context.Context, values map[string]string, req []byte) ([]byte, error)
	// Logger, when set, is where the plugin logs; nil means a JSON hclog
	// logger on stderr, which the host re-emits in its own log.
	Logger hclog.Logger
}

// Serve runs the plugin until the host stops it, then exits the process.
// Run by hand, without a host, it says so and exits 1.
func Serve(g Guest) {
	log := g.Logger
	if log == nil {
		log = hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true, Level: hclog.Trace})
	}
	go watchParent(log)
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: goplugin.HandshakeConfig{
			ProtocolVersion:  uint(g.Info.API.Major),
			MagicCookieKey:   plugin.CookieKey,
			MagicCookieValue: plugin.CookieValue,
		},
		Plugins: goplugin.PluginSet{pluginName: &grpcPlugin{impl: &guestService{g: g, log: log}}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, grpc.MaxRecvMsgSize(plugin.MaxMessage), grpc.MaxSendMsgSize(plugin.MaxMessage))...)
		},
		Logger: log,
	})
	os.Exit(0)
}

// watchParent ends the plugin when its host is gone. The host also asks
// the kernel for that (Pdeathsig); this covers the case where the host's
// forking thread ended before the host did.
func watchParent(log hclog.Logger) {
	parent := os.Getppid()
	for range time.Tick(100 * time.Millisecond) {
		if os.Getppid() != parent {
			log.Warn("host process is gone; exiting", "host_pid", parent)
			os.Exit(1)
		}
	}
}

type guestService struct {
	g   Guest
	log hclog.Logger

	mu     sync.Mutex
	values map[string]string
}

func (s *guestService) Describe(context.Context, []byte) ([]byte, error) {
	i := s.g.Info
	d := plugin.Description{
		Framework: i.Framework, Name: i.Name, Priority: i.Priority,
		Version: [3]int{i.Version.Major, i.Version.Minor, i.Version.Patch},
		API:     [3]int{i.API.Major, i.API.Minor, i.API.Patch},
	}
	for _, p := range s.g.Params {
		spec := plugin.ParamSpec{Name: p.Name, Type: p.Type.String(), Default: p.Default, Help: p.Help, Level: p.Level}
		for _, v := range p.Values {
			spec.Values = append(spec.Values, plugin.EnumSpec{Value: v.Value, Name: v.Name})
		}
		if p.Range != nil {
			spec.Range = &[2]int64{p.Range.Min, p.Range.Max}
		}
		d.Params = append(d.Params, spec)
	}
	return json.Marshal(d)
}

func (s *guestService) Open(_ context.Context, in []byte) ([]byte, error) {
	var req plugin.OpenRequest
	if err := json.Unmarshal(in, &req); err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	s.mu.Lock()
	s.values = req.Params
	s.mu.Unlock()
	return nil, nil
}

func (s *guestService) Query(ctx context.Context, in []byte) ([]byte, error) {
	if s.g.Query == nil {
		return nil, fmt.Errorf("this plugin answers no query")
	}
	s.mu.Lock()
	values := s.values
	s.mu.Unlock()
	return s.g.Query(ctx, values, in)
}
