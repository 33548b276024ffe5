package sip_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// request is a request line and the headers every request needs, from
// local, with extra headers and no body.
func request(line, method, local, id, extra string) string {
	return fmt.Sprintf("%[1]s\nVia: SIP/2.0/UDP %[3]s;branch=z9hG4bK-%[4]s\nFrom: <sip:caller@%[3]s>;tag=%[4]s\nTo: <sip:agent@127.0.0.1>\n"+
		"Call-ID: %[4]s\nCSeq: 1 %[2]s\nMax-Forwards: 70\n%[5]sContent-Length: 0\n\n", line, method, local, id, extra)
}

// The SIP conformance table: requests a strict peer (or RFC 4475's torture
// tests) sends, each answered as RFC 3261 says, and the server still
// answering calls after them.
func TestRequestsAreAnsweredAsTheRFCSays(t *testing.T) {
	srv, addr, _ := startServer(t)
	for i, tc := range []struct {
		name, line, method, extra string
		status                    string
		want                      []string // in the response
	}{
		{"another SIP version gets 505 (RFC 4475 3.1.2.16)", "OPTIONS sip:agent@127.0.0.1 SIP/7.0", "OPTIONS", "", "505", []string{"Warning: 399"}},
		{"SIP/3.0 gets 505, in SIP/2.0", "INVITE sip:agent@127.0.0.1 SIP/3.0", "INVITE", "", "505", nil},
		{"an http Request-URI gets 416 (RFC 4475 3.3.12)", "INVITE http://127.0.0.1/agent SIP/2.0", "INVITE", "", "416", []string{"Warning: 399"}},
		{"a mailto Request-URI gets 416", "OPTIONS mailto:agent@example.com SIP/2.0", "OPTIONS", "", "416", nil},
		{"a required extension Holdline lacks gets 420 and Unsupported (RFC 4475 3.3.7)", "INVITE sip:agent@127.0.0.1 SIP/2.0", "INVITE",
			"Require: nothingSupportsThis, 100rel\n", "420", []string{"Unsupported: nothingsupportsthis, 100rel"}},
		{"an OPTIONS requiring an extension gets 420 too", "OPTIONS sip:agent@127.0.0.1 SIP/2.0", "OPTIONS", "Require: timer\n", "420", []string{"Unsupported: timer"}},
		{"a CANCEL of nothing gets 481", "CANCEL sip:agent@127.0.0.1 SIP/2.0", "CANCEL", "", "481", nil},
		{"a BYE of no call gets 481", "BYE sip:agent@127.0.0.1 SIP/2.0", "BYE", "", "481", nil},
		{"a method Holdline does not take gets 405 and Allow (RFC 4475 3.1.2.8)", "NEWMETHOD sip:agent@127.0.0.1 SIP/2.0", "NEWMETHOD", "", "405",
			[]string{"Allow: INVITE, ACK, BYE, CANCEL, OPTIONS"}},
		{"OPTIONS gets 200 and what is supported", "OPTIONS sip:agent@127.0.0.1 SIP/2.0", "OPTIONS", "", "200", []string{"Allow: INVITE", "Accept: application/sdp"}},
		{"a tel Request-URI is a request like another", "OPTIONS tel:+15551234567 SIP/2.0", "OPTIONS", "", "200", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := dialRaw(t, addr)
			id := fmt.Sprintf("conformance-%d", i)
			u.send(request(tc.line, tc.method, u.local(), id, tc.extra))
			res := u.final(3 * time.Second)
			first, _, _ := strings.Cut(res, "\r\n")
			if !strings.HasPrefix(first, "SIP/2.0 "+tc.status+" ") {
				t.Fatalf("answered %q; want SIP/2.0 %s\n%s", first, tc.status, res)
			}
			for _, w := range tc.want {
				if !strings.Contains(res, w) {
					t.Errorf("the answer lacks %q:\n%s", w, res)
				}
			}
		})
	}
	// An ACK that is wrong gets no answer (ACKs never do) and breaks
	// nothing: the server still answers.
	u := dialRaw(t, addr)
	u.send(request("ACK sip:agent@127.0.0.1 SIP/3.0", "ACK", u.local(), "bad-ack", ""))
	if res := u.final(300 * time.Millisecond); res != "" {
		t.Errorf("an ACK was answered: %q", res)
	}
	u.send(request("OPTIONS sip:agent@127.0.0.1 SIP/2.0", "OPTIONS", u.local(), "after-the-table", ""))
	if res := u.final(3 * time.Second); !strings.HasPrefix(res, "SIP/2.0 200") {
		t.Fatalf("OPTIONS after the table answered %q", res)
	}
	if srv.Calls() != 0 {
		t.Errorf("%d calls up after requests that make none", srv.Calls())
	}
}
