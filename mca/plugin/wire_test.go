package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/params"
)

// repoRoot is where plugin.proto's import path starts: its name in the
// compiled descriptor is then protoPath, the name the SDK's service gives.
const (
	repoRoot  = "../.."
	protoPath = "mca/plugin/plugin.proto"
)

// compileProto compiles plugin.proto as protoc would, with the well-known
// types (wrappers.proto) built in, and returns its one service.
func compileProto(t *testing.T) (protoreflect.FileDescriptor, protoreflect.ServiceDescriptor) {
	t.Helper()
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(
		&protocompile.SourceResolver{ImportPaths: []string{repoRoot}})}
	files, err := c.Compile(context.Background(), protoPath)
	if err != nil {
		t.Fatalf("compiling %s: %v", protoPath, err)
	}
	fd := files[0]
	if fd.Services().Len() != 1 {
		t.Fatalf("%s declares %d services, want 1", fd.Path(), fd.Services().Len())
	}
	return fd, fd.Services().Get(0)
}

// The host calls the methods plugin.proto declares, by the names it gives,
// in the service it names.
func TestHostCallsMatchProto(t *testing.T) {
	fd, sd := compileProto(t)
	if got := string(sd.FullName()); got != ServiceName {
		t.Errorf("service %s in %s; the host calls %s", got, fd.Path(), ServiceName)
	}
	for _, name := range []string{"Describe", "Open", "Query"} {
		m := sd.Methods().ByName(protoreflect.Name(name))
		if m == nil {
			t.Errorf("the host calls %s, which %s does not declare", name, fd.Path())
			continue
		}
		if m.IsStreamingClient() || m.IsStreamingServer() {
			t.Errorf("%s streams; the host's calls are unary", m.FullName())
		}
	}
}

// docs/plugin-wire.md states the handshake's values and the limits; they
// are the code's.
func TestWireDocValues(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "plugin-wire.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, sd := compileProto(t)
	for _, want := range []string{
		fmt.Sprintf("| `%s` | `%s` |", CookieKey, CookieValue),
		fmt.Sprintf("| `plugin.MaxMessage` | %d bytes (%d MiB) |", MaxMessage, MaxMessage>>20),
		fmt.Sprintf("| `plugin.maxParams` | %d |", maxParams),
		fmt.Sprintf("| `plugin.maxHelp` | %d bytes |", maxHelp),
		fmt.Sprintf("| `plugin.maxEnumItems` | %d |", maxEnumItems),
		fmt.Sprintf("| `plugin.tailBytes` | %d bytes |", tailBytes),
		fmt.Sprintf("| `plugin.maxStderrLine` | %d bytes |", maxStderrLine),
		fmt.Sprintf("a line longer than %d bytes is cut there", maxStderrLine),
		"`" + ServiceName + "`",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/plugin-wire.md does not say %s", want)
		}
	}
	for i := 0; i < sd.Methods().Len(); i++ {
		full := "`/" + string(sd.FullName()) + "/" + string(sd.Methods().Get(i).Name()) + "`"
		if !strings.Contains(doc, full) {
			t.Errorf("docs/plugin-wire.md does not name the method %s", full)
		}
	}
	// The timeout row: the parameter's default and range as registered.
	p, ok := mca.Default().Params().Lookup(mca.PluginTimeoutName)
	if !ok {
		t.Fatalf("%s is not registered", mca.PluginTimeoutName)
	}
	timeout := p.Def()
	want := fmt.Sprintf("| `%s` | %s s by default (%d to %d) |", mca.PluginTimeoutName, timeout.Default, timeout.Range.Min, timeout.Range.Max)
	if !strings.Contains(doc, want) {
		t.Errorf("docs/plugin-wire.md does not say %s", want)
	}
}

// jsonBlock is the first ```json block after heading in doc.
func jsonBlock(t *testing.T, doc, heading string) []byte {
	t.Helper()
	_, after, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/plugin-wire.md has no %q", heading)
	}
	_, after, ok = strings.Cut(after, "```json\n")
	block, _, ok2 := strings.Cut(after, "```")
	if !ok || !ok2 {
		t.Fatalf("docs/plugin-wire.md: no JSON example under %q", heading)
	}
	return []byte(block)
}

// The doc's description example is one the host accepts, and its Open
// example is what the host sends for it with every parameter at its
// default: the values as text, as the doc says.
func TestWireDocJSON(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "plugin-wire.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	d, err := ParseDescription(jsonBlock(t, doc, "### Describe"), "coll", "ring")
	if err != nil {
		t.Fatalf("the doc's description: %v", err)
	}
	reg := params.NewRegistry()
	for _, def := range d.Defs() {
		def.Framework, def.Component = d.Framework, d.Name
		reg.Register(def)
	}
	vals, err := params.Resolve(reg, params.Sources{Env: []string{"OMPI_MCA_mca_base_param_files=none"}})
	if err != nil {
		t.Fatal(err)
	}
	// As Handle.Start builds it.
	req := OpenRequest{Params: map[string]string{}}
	for _, p := range d.Params {
		q, _ := reg.Lookup(p.Name)
		req.Params[p.Name] = vals.Get(q).String()
	}
	var inDoc OpenRequest
	if err := json.Unmarshal(jsonBlock(t, doc, "### Open"), &inDoc); err != nil {
		t.Fatalf("the doc's open request: %v", err)
	}
	if fmt.Sprint(inDoc) != fmt.Sprint(req) {
		t.Errorf("the doc's open request is %v; the host sends %v", inDoc.Params, req.Params)
	}
}
