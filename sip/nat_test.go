package sip

import (
	"net/netip"
	"testing"

	sipmsg "github.com/emiago/sipgo/sip"
)

// A caller is taken to be behind NAT when its SDP or Contact names a
// private address other than the one its INVITE came from, as Kamailio's
// nat_uac_test does; a caller whose addresses are its own, or public, is
// not.
func TestBehindNATIsJudgedFromTheCallersOwnAddresses(t *testing.T) {
	for _, tc := range []struct {
		name, source, media, contact string
		want                         bool
	}{
		{"private SDP, public source", "198.51.100.9:5060", "192.168.1.20", "198.51.100.9", true},
		{"private Contact, public source", "198.51.100.9:5060", "198.51.100.9", "10.0.0.7", true},
		{"carrier-grade NAT SDP", "198.51.100.9:5060", "100.64.3.4", "198.51.100.9", true},
		{"a LAN phone, its own address", "192.168.1.20:5060", "192.168.1.20", "192.168.1.20", false},
		{"public SDP elsewhere (a media server)", "198.51.100.9:5060", "203.0.113.5", "198.51.100.9", false},
		{"hold by 0.0.0.0", "198.51.100.9:5060", "0.0.0.0", "198.51.100.9", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := sipmsg.NewRequest(sipmsg.INVITE, sipmsg.Uri{Scheme: "sip", User: "agent", Host: "127.0.0.1"})
			req.SetSource(tc.source)
			req.AppendHeader(&sipmsg.ContactHeader{Address: sipmsg.Uri{Scheme: "sip", User: "caller", Host: tc.contact, Port: 5060}})
			if got := behindNAT(req, MediaOffer{Addr: netip.MustParseAddr(tc.media), Port: 4000}); got != tc.want {
				t.Errorf("behind NAT = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestURITransport(t *testing.T) {
	for raw, want := range map[string]string{
		"sip:a@h":                "udp",
		"sip:a@h;transport=tcp":  "tcp",
		"sip:a@h;transport=TLS":  "tls",
		"sips:a@h":               "tls",
		"sips:a@h;transport=tcp": "tls",
		"sip:a@h;transport=sctp": "sctp",
	} {
		var u sipmsg.Uri
		if err := sipmsg.ParseUri(raw, &u); err != nil {
			t.Fatal(err)
		}
		if got := uriTransport(u); got != want {
			t.Errorf("%s: %s, want %s", raw, got, want)
		}
	}
}
