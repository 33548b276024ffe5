package sip

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	sipmsg "github.com/emiago/sipgo/sip"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/store"
)

// WithStore makes calls outlive this worker and move between workers: each
// call's session is checkpointed to st under a lease held as worker,
// sealed with keys[0] (the others verify older snapshots), and its
// mutations journaled there.
//
// A call transferred with Transfer carries a handoff token
// (X-Holdline-Handoff) that leads to its last checkpoint: a Holdline
// worker sharing st that answers the transferred call takes the
// conversation over, and its agent speaks first, from where it was.
//
// A call cut off by a dead worker is picked up when the caller redials
// the same number from the same line within the redial window
// (WithRedialWindow): whichever worker answers loads its last checkpoint.
func WithStore(st store.Store, worker string, keys ...handoff.Key) Option {
	return hostOption(calls.WithStore(st, worker, keys...))
}

// DefaultRedialWindow is how long after its worker died a call can be
// picked up by the caller dialling again (WithStore).
const DefaultRedialWindow = 2 * time.Minute

// WithRedialWindow sets how long after its worker died a call can be
// picked up by the caller dialling again (default DefaultRedialWindow; 0
// turns it off). The caller is recognised by the number it calls from
// (P-Asserted-Identity when the trunk sends it, else From) and the number
// it calls: as far as the trunk vouches for those, since anyone who can
// send that caller's number reaches its conversation within the window.
// A call that ended normally is never picked up again.
func WithRedialWindow(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("sip: redial window %v", d)
		}
		c.redial = d
		return nil
	}
}

// callLeaseTTL is how long a worker's hold on a call lasts unrenewed: a
// redial waits up to this for a dead worker's hold to lapse.
const callLeaseTTL = 5 * time.Second

// takeOver returns the snapshot an INVITE's handoff token leads to, or nil
// when it has none or the store does not know it (the call is then
// answered afresh: the caller is on the line either way).
func (s *Server) takeOver(req *sipmsg.Request) *handoff.Snapshot {
	tok := handoffToken(req)
	if !s.host.HasStore() || tok == "" {
		return nil
	}
	snap, err := s.host.Resume(s.ctx, tok)
	if err != nil {
		s.cfg.log.Warn("handoff token not taken up: answering afresh", "call_id", callID(req), "err", err)
		return nil
	}
	return snap
}

// handoffToken is the handoff token an INVITE carries: in its
// X-Holdline-Handoff header (put there from the Refer-To URI's headers,
// RFC 3515), or in its Request-URI's user part, which every phone and
// proxy keeps (a move's Refer-To names the front door as
// sip:hl-handoff.TOKEN@PROXY).
func handoffToken(req *sipmsg.Request) string {
	if h := req.GetHeader(HandoffHeader); h != nil && h.Value() != "" {
		return h.Value()
	}
	if u, ok := strings.CutPrefix(req.Recipient.User, handoffUserPrefix); ok {
		return u
	}
	return ""
}

// handoffUserPrefix begins the user part of a Request-URI that carries a
// handoff token.
const handoffUserPrefix = "hl-handoff."

// lineKey names the caller's line in the store, for picking a cut-off call
// up again: the number called from and the number called, hashed (the
// store needs no phone numbers in clear). ok is false for a caller who
// withholds its number.
func lineKey(req *sipmsg.Request) (key string, ok bool) {
	var from sipmsg.Uri
	if h := req.GetHeader("P-Asserted-Identity"); h != nil {
		v := h.Value()
		if i, j := strings.IndexByte(v, '<'), strings.IndexByte(v, '>'); i >= 0 && j > i {
			v = v[i+1 : j]
		}
		_ = sipmsg.ParseUri(strings.TrimSpace(v), &from)
	}
	if from.User == "" {
		if f := req.From(); f != nil {
			from = f.Address
		}
	}
	to := req.Recipient
	if t := req.To(); t != nil {
		to = t.Address
	}
	caller := strings.ToLower(from.User)
	if caller == "" || caller == "anonymous" || strings.EqualFold(from.Host, "anonymous.invalid") {
		return "", false
	}
	// A telephone number names the caller wherever the call comes in
	// from (a carrier's gateways differ); any other user only with its
	// domain.
	if n, ok := phoneNumber(caller); ok {
		caller = n
	} else {
		caller += "@" + strings.ToLower(from.Host)
	}
	called := strings.ToLower(to.User)
	if n, ok := phoneNumber(called); ok {
		called = n
	}
	sum := sha256.Sum256([]byte(caller + ">" + called))
	return "sip-line:" + hex.EncodeToString(sum[:16]), true
}

// phoneNumber returns user's digits when user is a telephone number: an
// optional +, digits, and the visual separators RFC 3966 allows.
func phoneNumber(user string) (string, bool) {
	var b strings.Builder
	for i, r := range user {
		switch {
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == '+' && i == 0:
			b.WriteRune(r)
		case r == '-' || r == '.' || r == '(' || r == ')':
		default:
			return "", false
		}
	}
	return b.String(), b.Len() > 0 && strings.Trim(b.String(), "+") != ""
}

// pickUp returns the conversation a redialled INVITE picks up: the
// session the caller's line last had, when its call was cut off rather
// than ended (calls.Host.PickUp). The session stays claimed until unclaim
// is called, after the call has started.
func (s *Server) pickUp(line string) (snap *handoff.Snapshot, unclaim func()) {
	if s.cfg.redial <= 0 || line == "" {
		return nil, func() {}
	}
	return s.host.PickUp(s.ctx, line, callLeaseTTL)
}
