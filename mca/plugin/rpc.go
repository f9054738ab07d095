package plugin

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

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
			return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/" + serviceName + "/" + name}, run)
		},
	}
}

// serviceDesc is the service of plugin.proto, declared by hand rather than
// generated (so that building gompi needs no protoc); the package's tests
// compile plugin.proto and check that the two agree. Metadata names the
// .proto as generated code would.
var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*service)(nil),
	Methods: []grpc.MethodDesc{
		method("Describe", service.Describe),
		method("Open", service.Open),
		method("Query", service.Query),
	},
	Metadata: "mca/plugin/plugin.proto",
}

// rpcClient calls a guest's service.
type rpcClient struct{ cc *grpc.ClientConn }

func (c *rpcClient) call(ctx context.Context, name string, in []byte) ([]byte, error) {
	out := new(wrapperspb.BytesValue)
	if err := c.cc.Invoke(ctx, "/"+serviceName+"/"+name, wrapperspb.Bytes(in), out); err != nil {
		return nil, err
	}
	return out.GetValue(), nil
}

// grpcPlugin is the go-plugin glue on both sides: the guest registers its
// service, the host gets an rpcClient.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl service // guest side only
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	s.RegisterService(&serviceDesc, p.impl)
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, cc *grpc.ClientConn) (any, error) {
	return &rpcClient{cc: cc}, nil
}
