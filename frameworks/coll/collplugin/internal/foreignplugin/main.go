// Command foreignplugin is a coll plugin written the way one in another
// language is: from mca/plugin/plugin.proto and docs/plugin-wire.md alone.
// It uses neither go-plugin nor any gompi package, only what a Python or
// C++ plugin has too: a gRPC server with the health service, a protobuf
// runtime, and the .proto compiled (here at start, from the path in
// GOMPI_FOREIGN_PROTO, where a generator would have run at build time).
// It does the handshake by hand, writes its JSON by hand and encodes its
// schedules byte by byte, so that its test (main_test.go) fails when the
// doc and the host part ways.
//
// Installed as gompi-coll-<name>, it is component <name>. It fills the
// barrier with a dissemination schedule, and declares one parameter,
// coll_<name>_enable (bool, default true); false makes it decline.
package main

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/bufbuild/protocompile"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/emptypb"
)

// From docs/plugin-wire.md §2.
const (
	cookieKey   = "GOMPI_PLUGIN_COOKIE"
	cookieValue = "d8f1c0b2-gompi-mca-plugin-v1"
	collAPI     = 1        // the coll API this plugin was written for: the protocol version
	maxMessage  = 64 << 20 // the host's bound on a message
)

func main() {
	if os.Getenv(cookieKey) != cookieValue {
		fmt.Fprintln(os.Stderr, "This binary is a plugin. These are not meant to be executed directly.")
		os.Exit(1)
	}
	signal.Ignore(os.Interrupt)
	go watchParent()

	name := strings.TrimPrefix(filepath.Base(os.Args[0]), "gompi-coll-")
	svc, err := compileService(os.Getenv("GOMPI_FOREIGN_PROTO"), "gompi.plugin.v1.Component")
	if err != nil {
		fail(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxMessage))
	p := &component{name: name}
	desc, err := serviceFrom(svc, map[string]func([]byte) ([]byte, error){
		"Describe": p.describe, "Open": p.open, "Query": p.query,
	})
	if err != nil {
		fail(err)
	}
	srv.RegisterService(desc, struct{}{})
	srv.RegisterService(&controller, srv)
	hs := health.NewServer()
	hs.SetServingStatus("plugin", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)

	fmt.Printf("1|%d|tcp|%s|grpc\n", collAPI, lis.Addr())
	logf("info", "serving", "address", lis.Addr().String())
	if err := srv.Serve(lis); err != nil {
		fail(err)
	}
}

func fail(err error) {
	logf("error", err.Error())
	os.Exit(1)
}

// logf writes one log line in hclog's JSON form, which the host re-emits
// at its level.
func logf(level, msg string, kv ...string) {
	e := map[string]string{"@level": level, "@message": msg,
		"@timestamp": time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00")}
	for i := 0; i+1 < len(kv); i += 2 {
		e[kv[i]] = kv[i+1]
	}
	b, _ := json.Marshal(e)
	fmt.Fprintf(os.Stderr, "%s\n", b)
}

// watchParent exits when the host is gone.
func watchParent() {
	parent := os.Getppid()
	for range time.Tick(100 * time.Millisecond) {
		if os.Getppid() != parent {
			os.Exit(1)
		}
	}
}

// compileService compiles the .proto file and returns the named service.
func compileService(path, service string) (protoreflect.ServiceDescriptor, error) {
	if path == "" {
		return nil, fmt.Errorf("GOMPI_FOREIGN_PROTO names no .proto file")
	}
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(
		&protocompile.SourceResolver{ImportPaths: []string{filepath.Dir(path)}})}
	files, err := c.Compile(context.Background(), filepath.Base(path))
	if err != nil {
		return nil, err
	}
	d, err := files.AsResolver().FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return nil, err
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s is not a service", service)
	}
	return sd, nil
}

// serviceFrom is the gRPC service of sd with calls, one per method of
// sd, each given the request's bytes field "value" and answering the
// reply's: what generated code does.
func serviceFrom(sd protoreflect.ServiceDescriptor, calls map[string]func([]byte) ([]byte, error)) (*grpc.ServiceDesc, error) {
	desc := &grpc.ServiceDesc{ServiceName: string(sd.FullName()), HandlerType: (*any)(nil)}
	for i := 0; i < sd.Methods().Len(); i++ {
		m := sd.Methods().Get(i)
		call := calls[string(m.Name())]
		in, out := m.Input().Fields().ByName("value"), m.Output().Fields().ByName("value")
		switch {
		case call == nil:
			return nil, fmt.Errorf("%s: not implemented", m.FullName())
		case m.IsStreamingClient() || m.IsStreamingServer():
			return nil, fmt.Errorf("%s streams", m.FullName())
		case in == nil || out == nil || in.Kind() != protoreflect.BytesKind || out.Kind() != protoreflect.BytesKind:
			return nil, fmt.Errorf("%s: no bytes field value", m.FullName())
		}
		desc.Methods = append(desc.Methods, grpc.MethodDesc{
			MethodName: string(m.Name()),
			Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				req := dynamicpb.NewMessage(m.Input())
				if err := dec(req); err != nil {
					return nil, err
				}
				b, err := call(req.Get(in).Bytes())
				if err != nil {
					return nil, err // status UNKNOWN with the message
				}
				reply := dynamicpb.NewMessage(m.Output())
				reply.Set(out, protoreflect.ValueOfBytes(b))
				return reply, nil
			},
		})
	}
	return desc, nil
}

// controller is go-plugin's plugin.GRPCController: Shutdown stops the
// server once it has answered, and main returns.
var controller = grpc.ServiceDesc{
	ServiceName: "plugin.GRPCController",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Shutdown",
		Handler: func(srv any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			if err := dec(new(emptypb.Empty)); err != nil {
				return nil, err
			}
			go srv.(*grpc.Server).GracefulStop()
			return new(emptypb.Empty), nil
		},
	}},
}

// component is the plugin itself: its description, the parameter values
// Open gave it, and its answer to a query.
type component struct {
	name string

	mu     sync.Mutex
	enable bool
}

func (c *component) param() string { return "coll_" + c.name + "_enable" }

func (c *component) describe([]byte) ([]byte, error) {
	return json.Marshal(map[string]any{
		"framework": "coll", "name": c.name, "version": []int{1, 0, 0}, "api": []int{collAPI, 0, 0},
		"priority": 70,
		"params": []map[string]any{{
			"name": c.param(), "type": "bool", "default": "true", "level": 3,
			"help": "Whether " + c.name + " fills the barrier",
		}},
	})
}

func (c *component) open(in []byte) ([]byte, error) {
	var req struct {
		Params map[string]string `json:"params"`
	}
	if err := json.Unmarshal(in, &req); err != nil {
		return nil, err
	}
	v, ok := req.Params[c.param()]
	if !ok || (v != "true" && v != "false") {
		return nil, fmt.Errorf("open: %s is %q, want true or false", c.param(), v)
	}
	c.mu.Lock()
	c.enable = v == "true"
	c.mu.Unlock()
	return nil, nil
}

func (c *component) query(in []byte) ([]byte, error) {
	var req struct {
		Size int `json:"size"`
		Rank int `json:"rank"`
	}
	if err := json.Unmarshal(in, &req); err != nil {
		return nil, err
	}
	c.mu.Lock()
	enable := c.enable
	c.mu.Unlock()
	if !enable || req.Size < 2 {
		return json.Marshal(map[string]string{"declined": fmt.Sprintf("%s is false, or one rank", c.param())})
	}
	b := barrier(req.Size, req.Rank)
	return json.Marshal(map[string]map[string]string{"schedules": {"barrier": base64.StdEncoding.EncodeToString(b)}})
}

// barrier is the dissemination barrier in the binary form of
// docs/plugin-wire.md §4: in round k rank sends to rank+2^k and receives
// from rank-2^k, empty messages.
func barrier(size, rank int) []byte {
	const (
		opBarrier = 0
		kindSend  = 1
		kindRecv  = 2
		bufNone   = 0
	)
	var rounds [][2]int // peers: to, from
	for k := 1; k < size; k <<= 1 {
		rounds = append(rounds, [2]int{(rank + k) % size, (rank - k + size) % size})
	}
	le := binary.LittleEndian
	b := []byte("GSC1")
	b = append(b, opBarrier)
	for _, v := range []int{size, rank, 1, len(rounds)} { // size, rank, parts, rounds
		b = le.AppendUint32(b, uint32(v))
	}
	for _, r := range rounds {
		b = le.AppendUint32(b, 2) // steps
		for i, kind := range []byte{kindSend, kindRecv} {
			b = append(b, kind)
			b = le.AppendUint32(b, uint32(r[i])) // peer
			b = append(b, bufNone, bufNone)      // src, dst
			b = le.AppendUint32(b, 0)            // first
			b = le.AppendUint32(b, 0)            // end
		}
	}
	return b
}
