package tcp

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
)

// Interface selection: btl_tcp_if_include or btl_tcp_if_exclude (never both)
// name interfaces ("eth0") or networks in CIDR form ("192.168.0.0/16"; a bare
// address means that address alone). With neither, every address of every
// interface that is up is used, loopback included (Open MPI leaves loopback
// out by default; we keep it because same-node ranks without shm need it).
// IPv6 link-local addresses are never used: they need a zone a business
// card cannot carry meaningfully to another host.

// ifaceInfo is one network interface as the selection sees it (tests make
// their own).
type ifaceInfo struct {
	name  string
	up    bool
	addrs []netip.Prefix
}

// localAddr is one address this module listens on.
type localAddr struct {
	iface  string
	prefix netip.Prefix // the address and its network
}

func (l localAddr) addr() netip.Addr { return l.prefix.Addr() }

// systemInterfaces lists the machine's interfaces.
func systemInterfaces() ([]ifaceInfo, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "btl tcp: listing network interfaces: %w", err)
	}
	out := make([]ifaceInfo, 0, len(ifs))
	for _, ifc := range ifs {
		info := ifaceInfo{name: ifc.Name, up: ifc.Flags&net.FlagUp != 0}
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, mpierr.Errorf(mpierr.ErrIntern, "btl tcp: addresses of interface %s: %w", ifc.Name, err)
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			ones, _ := ipn.Mask.Size()
			ip = ip.Unmap()
			if ip.Is4() && ones > 32 {
				ones -= 96
			}
			info.addrs = append(info.addrs, netip.PrefixFrom(ip, ones))
		}
		out = append(out, info)
	}
	return out, nil
}

// ifFilter is a parsed if_include or if_exclude list.
type ifFilter struct {
	names map[string]bool
	nets  []netip.Prefix
}

func (f *ifFilter) matches(iface string, a netip.Addr) bool {
	if f.names[iface] {
		return true
	}
	for _, n := range f.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

func describe(name string, v params.Value) string {
	return fmt.Sprintf("%s = %q (source: %s)", name, v.String(), v.Source)
}

func interfaceNames(ifaces []ifaceInfo) string {
	var names []string
	for _, i := range ifaces {
		desc := i.name
		var as []string
		for _, a := range i.addrs {
			as = append(as, a.String())
		}
		if len(as) > 0 {
			desc += " (" + strings.Join(as, " ") + ")"
		}
		if !i.up {
			desc += " (down)"
		}
		names = append(names, desc)
	}
	return strings.Join(names, ", ")
}

// parseIfList parses one of the two lists. Unknown interface names are an
// error in an include list (the user asked for something that is not there)
// and are returned for a log line in an exclude list (excluding what does
// not exist is harmless).
func parseIfList(name string, v params.Value, ifaces []ifaceInfo, include bool) (ifFilter, []string, error) {
	f := ifFilter{names: map[string]bool{}}
	exists := map[string]bool{}
	for _, i := range ifaces {
		exists[i.name] = true
	}
	var unknown []string
	for _, item := range v.List() {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if strings.Contains(item, "/") {
			p, err := netip.ParsePrefix(item)
			if err != nil {
				return f, nil, mpierr.Errorf(mpierr.ErrUnsupportedParam,
					"%s: %q is not a CIDR network; accepted: interface names and networks such as 192.168.0.0/16 or fd00::/8, comma-separated",
					describe(name, v), item)
			}
			f.nets = append(f.nets, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(item); err == nil {
			f.nets = append(f.nets, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		if !exists[item] {
			if include {
				return f, nil, mpierr.Errorf(mpierr.ErrUnsupportedParam,
					"%s: there is no network interface %q; interfaces: %s", describe(name, v), item, interfaceNames(ifaces))
			}
			unknown = append(unknown, item)
			continue
		}
		f.names[item] = true
	}
	return f, unknown, nil
}

// Address families for btl_tcp_disable_family.
const (
	familyNone = 0
	familyIPv4 = 4
	familyIPv6 = 6
)

func familyOf(a netip.Addr) int {
	if a.Unmap().Is4() {
		return familyIPv4
	}
	return familyIPv6
}

// selection is the outcome of interface selection.
type selection struct {
	addrs          []localAddr
	unknownExclude []string
}

// selectAddrs picks the addresses to listen on.
func selectAddrs(ifaces []ifaceInfo, incName string, inc params.Value, excName string, exc params.Value, disabled int) (selection, error) {
	var sel selection
	if len(inc.List()) > 0 && len(exc.List()) > 0 {
		return sel, mpierr.Errorf(mpierr.ErrUnsupportedParam,
			"%s and %s are both set; they are mutually exclusive: set only one of them", describe(incName, inc), describe(excName, exc))
	}
	include, _, err := parseIfList(incName, inc, ifaces, true)
	if err != nil {
		return sel, err
	}
	exclude, unknown, err := parseIfList(excName, exc, ifaces, false)
	if err != nil {
		return sel, err
	}
	sel.unknownExclude = unknown
	useInclude := len(inc.List()) > 0
	for _, ifc := range ifaces {
		if !ifc.up {
			continue
		}
		for _, p := range ifc.addrs {
			a := p.Addr()
			switch {
			case !a.IsValid() || a.IsUnspecified() || a.IsMulticast() || a.IsLinkLocalUnicast() && a.Is6():
				continue
			case familyOf(a) == disabled:
				continue
			case useInclude && !include.matches(ifc.name, a):
				continue
			case exclude.matches(ifc.name, a):
				continue
			}
			sel.addrs = append(sel.addrs, localAddr{iface: ifc.name, prefix: p})
		}
	}
	if useInclude && len(sel.addrs) == 0 {
		return sel, mpierr.Errorf(mpierr.ErrUnsupportedParam,
			"%s selects no usable address (interfaces must be up; IPv6 link-local addresses are not used); interfaces: %s",
			describe(incName, inc), interfaceNames(ifaces))
	}
	return sel, nil
}

// addrClass is a class of candidate address, best first.
type addrClass int

const (
	classLoopback addrClass = iota // over loopback: same network namespace (netns.go)
	classSubnet                    // an address on a network this process is on
	classRouted                    // any other address of a family this process has
)

func (c addrClass) String() string {
	switch c {
	case classLoopback:
		return "loopback"
	case classSubnet:
		return "subnet"
	case classRouted:
		return "routed"
	}
	return fmt.Sprintf("class(%d)", int(c))
}

type candidate struct {
	class  addrClass
	remote netip.AddrPort
}

// candidates returns the peer's addresses this process can use, best first:
// loopback when our loopback reaches the peer's (loopbackReaches), then
// addresses on one of our networks, then the rest of a family we have;
// IPv4 before IPv6 within a class.
func candidates(local []localAddr, peer []netip.AddrPort, loopback bool) []candidate {
	var out []candidate
	for _, ap := range peer {
		a := ap.Addr()
		class := addrClass(-1)
		for _, l := range local {
			la := l.addr()
			if familyOf(la) != familyOf(a) || la.IsLoopback() != a.IsLoopback() {
				continue
			}
			c := classRouted
			switch {
			case a.IsLoopback():
				if !loopback {
					continue
				}
				c = classLoopback
			case l.prefix.Masked().Contains(a):
				c = classSubnet
			}
			if class < 0 || c < class {
				class = c
			}
		}
		if class >= 0 {
			out = append(out, candidate{class: class, remote: ap})
		}
	}
	slices.SortStableFunc(out, func(x, y candidate) int {
		if c := cmp.Compare(x.class, y.class); c != 0 {
			return c
		}
		return cmp.Compare(familyOf(x.remote.Addr()), familyOf(y.remote.Addr()))
	})
	return out
}
