package controller

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ErrDestinationNotAllowed is wrapped by the error of a dial that
// Destinations refused.
var ErrDestinationNotAllowed = errors.New("controller: destination not allowed")

// Destinations is where the controller may connect for a RedisLock
// (-redis-allowed-destinations): networks (CIDRs) and DNS suffixes.
//
// What is guaranteed: Check is made on every connection, at dial time, on
// the IP the connection goes to, for the addresses of spec.redis and of
// connections and for those a Sentinel or a Cluster reports alike. An IP
// is allowed when a listed network holds it. A name is allowed when it is
// a listed suffix or ends in "." and one, and the IP it resolved to for
// this very dial is not a loopback, link-local or unspecified address
// (such as the cloud metadata service at 169.254.169.254) unless a listed
// network holds it. There is no second lookup to rebind between the check
// and the connection.
//
// What is not: a suffix trusts whoever writes its DNS records. A tenant
// who can create a Service (of type ExternalName, or headless with
// EndpointSlices of her own) under an allowed suffix points its name
// anywhere outside the always-refused ranges: allow cluster-internal
// Redis servers by network, and suffixes only for zones tenants cannot
// write.
type Destinations struct {
	nets     []netip.Prefix
	suffixes []string // lower case, without a leading dot
}

// ParseDestinations reads a comma-separated list of CIDRs (10.0.0.0/8),
// IPs (a network of one) and DNS suffixes (redis.example.com, or
// .redis.example.com: the same). Blank entries are skipped; nil and no
// error for a list with none: anywhere.
func ParseDestinations(list string) (*Destinations, error) {
	d := &Destinations{}
	for _, e := range strings.Split(list, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		if p, err := netip.ParsePrefix(e); err == nil {
			if p != p.Masked() {
				return nil, fmt.Errorf("%q has host bits set: write the network, %s", e, p.Masked())
			}
			d.nets = append(d.nets, p)
			continue
		}
		if a, err := netip.ParseAddr(e); err == nil {
			d.nets = append(d.nets, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		if strings.Contains(e, "/") || strings.Contains(e, ":") {
			return nil, fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8 or fd00::/8", e)
		}
		suffix := strings.ToLower(strings.TrimPrefix(e, "."))
		if errs := validation.IsDNS1123Subdomain(suffix); len(errs) > 0 {
			return nil, fmt.Errorf("%q is neither a CIDR, an IP nor a DNS suffix: %s", e, strings.Join(errs, "; "))
		}
		d.suffixes = append(d.suffixes, suffix)
	}
	if len(d.nets) == 0 && len(d.suffixes) == 0 {
		return nil, nil
	}
	return d, nil
}

// Check returns nil when the connection to addr (host:port, as the
// client dials it), which goes to resolved (IP:port), is allowed, else an
// error wrapping ErrDestinationNotAllowed that names both.
func (d *Destinations) Check(addr, resolved string) error {
	ap, err := netip.ParseAddrPort(resolved)
	if err != nil {
		return fmt.Errorf("%w: %s: cannot read the address dialed, %q", ErrDestinationNotAllowed, addr, resolved)
	}
	ip := ap.Addr().Unmap()
	for _, p := range d.nets {
		if p.Contains(ip) {
			return nil
		}
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if _, err := netip.ParseAddr(host); err != nil && d.allowsName(host) && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() && !ip.IsUnspecified() {
		return nil
	}
	return fmt.Errorf("%w: %s (%s) is outside -redis-allowed-destinations %s", ErrDestinationNotAllowed, addr, ip, d)
}

// allowsName reports whether host is a listed suffix or under one.
func (d *Destinations) allowsName(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, s := range d.suffixes {
		if host == s || strings.HasSuffix(host, "."+s) {
			return true
		}
	}
	return false
}

// String lists the destinations as ParseDestinations reads them.
func (d *Destinations) String() string {
	var out []string
	for _, p := range d.nets {
		out = append(out, p.String())
	}
	return strings.Join(append(out, d.suffixes...), ",")
}
