package sip

import (
	"strings"

	"github.com/emiago/sipgo"
	sipmsg "github.com/emiago/sipgo/sip"
)

// supportedExtensions are the option tags of SIP extensions Holdline
// implements: a request that requires another is refused (RFC 3261 8.2.2.3).
// None today: no 100rel, no session timers.
var supportedExtensions = map[string]bool{}

// byTheRFC wraps a request handler with the checks RFC 3261 8.2.2 asks of
// a UAS before it looks at a request's method: the protocol version (505),
// the Request-URI's scheme (416) and the extensions the request requires
// (420 with Unsupported). An ACK is never answered; a bad one is dropped.
func byTheRFC(h sipgo.RequestHandler) sipgo.RequestHandler {
	return func(req *sipmsg.Request, tx sipmsg.ServerTransaction) {
		ack := req.Method == sipmsg.ACK
		if req.SipVersion != "SIP/2.0" {
			if !ack {
				refuse(tx, req, 505, "Version Not Supported", "only SIP/2.0 is spoken here, not "+req.SipVersion)
			}
			return
		}
		switch strings.ToLower(req.Recipient.Scheme) {
		case "sip", "sips", "tel":
		default:
			if !ack {
				refuse(tx, req, 416, "Unsupported URI Scheme", "a Request-URI of scheme "+req.Recipient.Scheme+"; want sip, sips or tel")
			}
			return
		}
		if !ack && req.Method != sipmsg.CANCEL {
			if unknown := unsupported(req); len(unknown) > 0 {
				res := sipmsg.NewResponseFromRequest(req, 420, "Bad Extension", nil)
				res.AppendHeader(sipmsg.NewHeader("Unsupported", strings.Join(unknown, ", ")))
				res.AppendHeader(sipmsg.NewHeader("Warning", `399 holdline "required extensions not supported: `+strings.Join(unknown, ", ")+`"`))
				_ = tx.Respond(res)
				return
			}
		}
		h(req, tx)
	}
}

// unsupported lists the option tags req's Require headers name that
// Holdline does not implement.
func unsupported(req *sipmsg.Request) []string {
	var out []string
	for _, h := range req.GetHeaders("Require") {
		for _, tag := range strings.Split(h.Value(), ",") {
			tag = strings.ToLower(strings.TrimSpace(tag))
			if tag != "" && !supportedExtensions[tag] {
				out = append(out, tag)
			}
		}
	}
	return out
}

// refuse answers req with code, as SIP/2.0 whatever version the request
// spoke, and a Warning that says why.
func refuse(tx sipmsg.ServerTransaction, req *sipmsg.Request, code int, reason, why string) {
	res := sipmsg.NewResponseFromRequest(req, code, reason, nil)
	res.SipVersion = "SIP/2.0"
	res.AppendHeader(sipmsg.NewHeader("Warning", `399 holdline "`+strings.ReplaceAll(why, `"`, `'`)+`"`))
	_ = tx.Respond(res)
}

// onCancel answers a CANCEL the transaction layer matched to no pending
// INVITE: there is nothing to cancel (RFC 3261 9.2).
func (s *Server) onCancel(req *sipmsg.Request, tx sipmsg.ServerTransaction) {
	respond(tx, req, 481, "Call/Transaction Does Not Exist", "no request of this CANCEL's to cancel")
}

// onUnknown answers a method Holdline does not take with 405 and the
// methods it does (RFC 3261 8.2.1).
func (s *Server) onUnknown(req *sipmsg.Request, tx sipmsg.ServerTransaction) {
	res := sipmsg.NewResponseFromRequest(req, 405, "Method Not Allowed", nil)
	res.AppendHeader(sipmsg.NewHeader("Allow", allowedMethods))
	_ = tx.Respond(res)
}

// allowedMethods are the methods Holdline's SIP server takes.
const allowedMethods = "INVITE, ACK, BYE, CANCEL, OPTIONS, INFO, REFER, NOTIFY"
