package tcp

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
)

var testIfaces = []ifaceInfo{
	{name: "lo", up: true, addrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8"), netip.MustParsePrefix("::1/128")}},
	{name: "eth0", up: true, addrs: []netip.Prefix{
		netip.MustParsePrefix("192.0.2.2/24"), netip.MustParsePrefix("fd00::2/64"), netip.MustParsePrefix("fe80::1/64")}},
	{name: "eth1", up: true, addrs: []netip.Prefix{netip.MustParsePrefix("10.1.2.3/16")}},
	{name: "ifb0", up: false, addrs: []netip.Prefix{netip.MustParsePrefix("10.9.9.9/24")}},
}

// listValue parses text as the value of a List parameter.
func listValue(t *testing.T, text string) params.Value {
	t.Helper()
	reg := params.NewRegistry()
	p := reg.Register(params.Def{Name: "btl_tcp_test_list", Framework: "btl", Component: "tcp", Type: params.List, Level: 1})
	reg.Freeze()
	var src params.Sources
	if text != "" {
		src.CommandLine = []params.Setting{{Name: p.Name(), Value: text}}
	}
	vals, err := params.Resolve(reg, src)
	if err != nil {
		t.Fatal(err)
	}
	return vals.Get(p)
}

func addrsOf(sel selection) []string {
	var out []string
	for _, a := range sel.addrs {
		out = append(out, a.iface+"="+a.addr().String())
	}
	return out
}

func TestSelectAddrs(t *testing.T) {
	for _, tc := range []struct {
		include, exclude string
		disable          int
		want             []string
	}{
		{"", "", familyNone, []string{"lo=127.0.0.1", "lo=::1", "eth0=192.0.2.2", "eth0=fd00::2", "eth1=10.1.2.3"}},
		{"lo", "", familyNone, []string{"lo=127.0.0.1", "lo=::1"}},
		{"lo", "", familyIPv6, []string{"lo=127.0.0.1"}},
		{"192.0.2.0/24,eth1", "", familyNone, []string{"eth0=192.0.2.2", "eth1=10.1.2.3"}},
		{"127.0.0.1", "", familyNone, []string{"lo=127.0.0.1"}},
		{"fd00::/8", "", familyNone, []string{"eth0=fd00::2"}},
		{"", "lo,10.0.0.0/8", familyNone, []string{"eth0=192.0.2.2", "eth0=fd00::2"}},
		{"", "127.0.0.1/8,nosuch", familyIPv4, []string{"lo=::1", "eth0=fd00::2"}},
	} {
		sel, err := selectAddrs(testIfaces, "btl_tcp_if_include", listValue(t, tc.include),
			"btl_tcp_if_exclude", listValue(t, tc.exclude), tc.disable)
		if err != nil {
			t.Errorf("include %q exclude %q: %v", tc.include, tc.exclude, err)
			continue
		}
		if got := addrsOf(sel); !slices.Equal(got, tc.want) {
			t.Errorf("include %q exclude %q disable %d: %v, want %v", tc.include, tc.exclude, tc.disable, got, tc.want)
		}
	}
	// An excluded interface that does not exist is reported, not an error.
	sel, err := selectAddrs(testIfaces, "btl_tcp_if_include", listValue(t, ""), "btl_tcp_if_exclude", listValue(t, "nosuch"), familyNone)
	if err != nil || !slices.Equal(sel.unknownExclude, []string{"nosuch"}) {
		t.Errorf("exclude nosuch: %v, %v", sel.unknownExclude, err)
	}
}

func TestSelectAddrsErrors(t *testing.T) {
	for _, tc := range []struct {
		include, exclude string
		want             []string
	}{
		{"lo", "eth0", []string{"btl_tcp_if_include", "btl_tcp_if_exclude", `"lo"`, `"eth0"`, "mutually exclusive"}},
		{"nosuch0", "", []string{"btl_tcp_if_include", `"nosuch0"`, "lo (127.0.0.1/8 ::1/128)", "eth0", "eth1", "ifb0"}},
		{"10.0.0.0/99", "", []string{"btl_tcp_if_include", "10.0.0.0/99", "CIDR"}},
		{"", "10.0.0.0/xx", []string{"btl_tcp_if_exclude", "10.0.0.0/xx", "CIDR"}},
		{"172.16.0.0/12", "", []string{"btl_tcp_if_include", "selects no usable address"}},
		{"ifb0", "", []string{"selects no usable address", "(down)"}},
	} {
		_, err := selectAddrs(testIfaces, "btl_tcp_if_include", listValue(t, tc.include),
			"btl_tcp_if_exclude", listValue(t, tc.exclude), familyNone)
		if err == nil {
			t.Errorf("include %q exclude %q: no error", tc.include, tc.exclude)
			continue
		}
		if !errors.Is(err, mpierr.ErrUnsupportedParam) {
			t.Errorf("include %q exclude %q: error without the parameter class: %v", tc.include, tc.exclude, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("include %q exclude %q: error lacks %q: %v", tc.include, tc.exclude, w, err)
			}
		}
	}
}

func TestCandidates(t *testing.T) {
	local := []localAddr{
		{"lo", netip.MustParsePrefix("127.0.0.1/8")},
		{"eth0", netip.MustParsePrefix("192.0.2.2/24")},
		{"eth0", netip.MustParsePrefix("fd00::2/64")},
	}
	peer := []netip.AddrPort{
		netip.MustParseAddrPort("[fd00::7]:1"),
		netip.MustParseAddrPort("198.51.100.7:2"),
		netip.MustParseAddrPort("192.0.2.7:3"),
		netip.MustParseAddrPort("127.0.0.1:4"),
		netip.MustParseAddrPort("[::1]:5"), // we have no IPv6 loopback
	}
	show := func(cs []candidate) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.remote.String())
		}
		return out
	}
	if got, want := show(candidates(local, peer, true)), []string{"127.0.0.1:4", "192.0.2.7:3", "[fd00::7]:1", "198.51.100.7:2"}; !slices.Equal(got, want) {
		t.Errorf("loopback reaches: %v, want %v", got, want)
	}
	if got, want := show(candidates(local, peer, false)), []string{"192.0.2.7:3", "[fd00::7]:1", "198.51.100.7:2"}; !slices.Equal(got, want) {
		t.Errorf("loopback does not reach: %v, want %v", got, want)
	}
	if got := candidates(local[:1], peer, false); len(got) != 0 {
		t.Errorf("loopback only, and it does not reach: %v", show(got))
	}
}

// Loopback across nodes: a peer whose network namespace is ours is reached
// over loopback even on another node (goroutine ranks on fake nodes), a
// peer in another namespace is not even on this node (simulated hosts of
// one machine), and without both namespaces the node decides.
func TestLoopbackAcrossNodes(t *testing.T) {
	local := []localAddr{
		{"lo", netip.MustParsePrefix("127.0.0.1/8")},
		{"lo", netip.MustParsePrefix("::1/128")},
		{"eth0", netip.MustParsePrefix("192.0.2.2/24")},
	}
	peer := []netip.AddrPort{
		netip.MustParseAddrPort("192.0.2.7:3"),
		netip.MustParseAddrPort("127.0.0.1:4"),
		netip.MustParseAddrPort("[::1]:5"),
	}
	here := netNS{boot: [16]byte{0x56, 15: 0x35}, inode: 4026531833}
	otherNS := netNS{boot: here.boot, inode: 4026532301}
	otherBoot := netNS{boot: [16]byte{0x77, 15: 0x01}, inode: here.inode}
	withLo := []string{"127.0.0.1:4 loopback", "[::1]:5 loopback", "192.0.2.7:3 subnet"}
	noLo := []string{"192.0.2.7:3 subnet"}
	for _, tc := range []struct {
		name        string
		sameNode    bool
		mine, their netNS
		want        []string
	}{
		{"same namespace, other node", false, here, here, withLo},
		{"same namespace, same node", true, here, here, withLo},
		{"other namespace, other node", false, here, otherNS, noLo},
		{"other namespace, same node", true, here, otherNS, noLo},
		{"other boot, same inode", false, here, otherBoot, noLo},
		{"peer's unknown, other node", false, here, netNS{}, noLo},
		{"peer's unknown, same node", true, here, netNS{}, withLo},
		{"ours unknown, other node", false, netNS{}, here, noLo},
		{"ours unknown, same node", true, netNS{}, here, withLo},
		{"both unknown, other node", false, netNS{}, netNS{}, noLo},
		{"both unknown, same node", true, netNS{}, netNS{}, withLo},
	} {
		ok, why := loopbackReaches(tc.sameNode, tc.mine, tc.their)
		var got []string
		for _, c := range candidates(local, peer, ok) {
			got = append(got, c.remote.String()+" "+c.class.String())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v (loopback %v: %s), want %v", tc.name, got, ok, why, tc.want)
		}
		if why == "" {
			t.Errorf("%s: no reason given", tc.name)
		}
	}
}

// This process's namespace is known on Linux, and stable; the boot id
// parser takes the kernel's form only.
func TestThisNetNS(t *testing.T) {
	a, err := thisNetNS()
	if err != nil {
		t.Skipf("no network namespace here: %v", err)
	}
	b, err := thisNetNS()
	if err != nil || a != b || !a.known() {
		t.Errorf("read twice: %v and %v (%v)", a, b, err)
	}
	id, err := parseBootID("56c268de-8aeb-49bb-98e4-5c623a369735\n")
	if err != nil || id != [16]byte{0x56, 0xc2, 0x68, 0xde, 0x8a, 0xeb, 0x49, 0xbb, 0x98, 0xe4, 0x5c, 0x62, 0x3a, 0x36, 0x97, 0x35} {
		t.Errorf("parseBootID: %x %v", id, err)
	}
	for _, bad := range []string{"", "56c268de8aeb49bb98e45c623a369735", "56c268de-8aeb-49bb-98e4-5c623a36973g",
		"00000000-0000-0000-0000-000000000000", "56c268de-8aeb-49bb-98e4-5c623a369735-00"} {
		if _, err := parseBootID(bad); err == nil {
			t.Errorf("parseBootID(%q) accepted", bad)
		}
	}
}
