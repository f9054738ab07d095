package sdk

import (
	"context"
	"errors"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/gompi/gompi/mca/plugin"
)

// pluginName is the name under which the one plugin of every gompi plugin
// binary is registered with go-plugin (a name of go-plugin's API, not of
// the wire).
const pluginName = "component"

// service is what a guest serves: three calls of bytes in, bytes out.
type service interface {
	Describe(ctx context.Context, in []byte) ([]byte, error)
	Open(ctx context.Context, in []byte) ([]byte, error)
	Query(ctx context.Context, in []byte) ([]byte, error)
}

// method adapts one call of service to gRPC's handler form.
func method(name string, call func(s service, ctx context.Context, in []byte) ([]byte, error)) grpc.MethodDesc {
	return grpc.MethodDesc{
		MethodName: name,
		Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.BytesValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			run := func(ctx context.Context, req any) (any, error) {
				out, err := call(srv.(service), ctx, req.(*wrapperspb.BytesValue).GetValue())
				if err != nil {
					return nil, err
				}
				return wrapperspb.Bytes(out), nil
			}
			if icpt == nil {
				return run(ctx, in)
			}
			return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/" + plugin.ServiceName + "/" + name}, run)
		},
	}
}

// serviceDesc is the service of plugin.proto, declared by hand rather than
// generated (so that building gompi needs no protoc); the package's tests
// compile plugin.proto and check that the two agree. Metadata names the
// .proto as generated code would.
var serviceDesc = grpc.ServiceDesc{
	ServiceName: plugin.ServiceName,
	HandlerType: (*service)(nil),
	Methods: []grpc.MethodDesc{
		method("Describe", service.Describe),
		method("Open", service.Open),
		method("Query", service.Query),
	},
	Metadata: "mca/plugin/plugin.proto",
}

// grpcPlugin is the go-plugin glue: the guest registers its service. (The
// host does not use go-plugin: package plugin speaks the wire itself.)
type grpcPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	impl service // guest side only
}

func (p *grpcPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	s.RegisterService(&serviceDesc, p.impl)
	return nil
}

// GRPCClient is go-plugin's host side, which gompi does not use.
func (p *grpcPlugin) GRPCClient(context.Context, *goplugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("gompi's host does not use go-plugin's client")
}
