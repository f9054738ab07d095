package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sort"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mca/plugin"
	"github.com/gompi/gompi/params"
)

// repoRoot is where plugin.proto's import path starts: its name in the
// compiled descriptor is then the path serviceDesc.Metadata gives.
const repoRoot = "../../.."

// compileProto compiles plugin.proto as protoc would, with the well-known
// types (wrappers.proto) built in, and returns its one service.
func compileProto(t *testing.T) (protoreflect.FileDescriptor, protoreflect.ServiceDescriptor) {
	t.Helper()
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(
		&protocompile.SourceResolver{ImportPaths: []string{repoRoot}})}
	name, _ := serviceDesc.Metadata.(string)
	files, err := c.Compile(context.Background(), name)
	if err != nil {
		t.Fatalf("compiling %s (serviceDesc.Metadata): %v", name, err)
	}
	fd := files[0]
	if fd.Services().Len() != 1 {
		t.Fatalf("%s declares %d services, want 1", fd.Path(), fd.Services().Len())
	}
	return fd, fd.Services().Get(0)
}

// The hand-written service is the one plugin.proto declares: same full
// name, the same methods, each unary from BytesValue to BytesValue, so a
// plugin generated from the .proto in any language answers what the host
// calls.
func TestServiceMatchesProto(t *testing.T) {
	fd, sd := compileProto(t)
	if got := string(sd.FullName()); got != serviceDesc.ServiceName || got != plugin.ServiceName {
		t.Errorf("service %s in %s; the Go side serves %s and calls %s", got, fd.Path(), serviceDesc.ServiceName, plugin.ServiceName)
	}
	if len(serviceDesc.Streams) != 0 {
		t.Errorf("the Go side has streams %v; the .proto's methods are unary", serviceDesc.Streams)
	}
	bytesValue := (&wrapperspb.BytesValue{}).ProtoReflect().Descriptor().FullName()
	var inProto, inGo []string
	for i := 0; i < sd.Methods().Len(); i++ {
		m := sd.Methods().Get(i)
		inProto = append(inProto, string(m.Name()))
		if m.IsStreamingClient() || m.IsStreamingServer() {
			t.Errorf("%s streams; the Go side's methods are unary", m.FullName())
		}
		if m.Input().FullName() != bytesValue || m.Output().FullName() != bytesValue {
			t.Errorf("%s: %s → %s, want %s both ways", m.FullName(), m.Input().FullName(), m.Output().FullName(), bytesValue)
		}
	}
	for _, m := range serviceDesc.Methods {
		inGo = append(inGo, m.MethodName)
	}
	sort.Strings(inProto)
	sort.Strings(inGo)
	if fmt.Sprint(inProto) != fmt.Sprint(inGo) {
		t.Errorf("methods: %v in %s, %v in serviceDesc", inProto, fd.Path(), inGo)
	}
	// The host calls by name: each name it uses must be a method.
	for _, name := range []string{"Describe", "Open", "Query"} {
		if sd.Methods().ByName(protoreflect.Name(name)) == nil {
			t.Errorf("the host calls %s, which %s does not declare", name, fd.Path())
		}
	}
}

// A client that knows nothing but plugin.proto (dynamic messages built
// from the compiled descriptor, method names from it) calls the guest SDK
// as served by a plugin: what a host, or a plugin, in another language
// would do with code generated from the .proto.
func TestProtoClientCallsGuest(t *testing.T) {
	_, sd := compileProto(t)
	g := Guest{
		Info: mca.Info{Framework: "coll", Name: "ring", Version: mca.Version{Major: 1, Minor: 2}, API: mca.Version{Major: 1}, Priority: 50},
		Params: []params.Def{{Name: "coll_ring_mode", Type: params.Enum, Default: "fast", Level: 5,
			Values: []params.EnumValue{{Value: 0, Name: "fast"}, {Value: 1, Name: "careful"}}}},
		Query: func(_ context.Context, values map[string]string, req []byte) ([]byte, error) {
			if string(req) == "fail" {
				return nil, errors.New("no such question")
			}
			return []byte(values["coll_ring_mode"] + ":" + string(req)), nil
		},
	}
	lis, err := net.Listen("unix", filepath.Join(t.TempDir(), "plugin.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	srv.RegisterService(&serviceDesc, &guestService{g: g, log: hclog.NewNullLogger()})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	cc, err := grpc.NewClient("unix://"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()

	call := func(method string, in []byte) ([]byte, error) {
		m := sd.Methods().ByName(protoreflect.Name(method))
		if m == nil {
			t.Fatalf("%s declares no %s", sd.FullName(), method)
		}
		req, resp := dynamicpb.NewMessage(m.Input()), dynamicpb.NewMessage(m.Output())
		value := m.Input().Fields().ByName("value")
		if value == nil || value.Kind() != protoreflect.BytesKind {
			t.Fatalf("%s's input has no bytes field \"value\"", m.FullName())
		}
		req.Set(value, protoreflect.ValueOfBytes(in))
		err := cc.Invoke(context.Background(), "/"+string(sd.FullName())+"/"+string(m.Name()), req, resp)
		return resp.Get(m.Output().Fields().ByName("value")).Bytes(), err
	}

	b, err := call("Describe", nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := plugin.ParseDescription(b, "coll", "ring")
	if err != nil {
		t.Fatalf("the description through the .proto's client: %v\n%s", err, b)
	}
	if d.Info() != g.Info || len(d.Params) != 1 || d.Params[0].Type != "enum" || d.Params[0].Values[1].Name != "careful" {
		t.Errorf("description %s, want %+v and its parameter", b, g.Info)
	}
	open, _ := json.Marshal(plugin.OpenRequest{Params: map[string]string{"coll_ring_mode": "careful"}})
	if _, err := call("Open", open); err != nil {
		t.Fatal(err)
	}
	if b, err := call("Query", []byte("size?")); err != nil || string(b) != "careful:size?" {
		t.Errorf("Query: %q, %v; want the opened value and the question back", b, err)
	}
	// A plugin's own error reaches the host as UNKNOWN with its message:
	// what the host reports and survives (Process.call).
	_, err = call("Query", []byte("fail"))
	if st, _ := status.FromError(err); st.Code() != codes.Unknown || st.Message() != "no such question" {
		t.Errorf("a failed query: %v, want code Unknown and the plugin's message", err)
	}
}
