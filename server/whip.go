package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/holdline/holdline/webrtc"
)

// WHIP (RFC 9725): a session is a WHIP resource. The endpoint answers a
// CORS preflight and the OPTIONS a WHIP client sends before its offer; a
// session ends with DELETE (200, as the RFC's flow has it); trickle ICE
// over PATCH is not taken, because the answer carries every candidate the
// server has (501, as RFC 9725 4.3.1 allows for the whole resource).
//
// The ICE servers a client should use (serve --ice-servers, --turn-secret)
// go in Link headers (RFC 9725 section 4.6) on the 201 and on OPTIONS, and
// in /v1/config's ice_servers. Those with credentials go only to a request
// that carries the server's token, when one is set: a CORS preflight or a
// page that has not been given the token sees the STUN servers only.

// corsAllowHeaders are the request headers a browser on another origin
// may send: the token, the offer's type, and WHIP's If-Match.
const corsAllowHeaders = "Authorization, Content-Type, If-Match, " + HeaderResumeToken

// corsExposeHeaders are the response headers such a page may read.
const corsExposeHeaders = "Location, Link, ETag, Accept-Post, " + HeaderResumeToken + ", " + HeaderResumed

// cors lets a WHIP client or a page on another origin use the session
// routes: the token, not the origin, is what grants access.
func cors(h http.Header, methods string) {
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", methods)
	h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
	h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
	h.Set("Access-Control-Max-Age", "86400")
}

// withCORS adds the CORS headers to every answer of next.
func withCORS(methods string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cors(w.Header(), methods)
		next(w, r)
	}
}

// Methods of the WHIP endpoint and of a session resource.
const (
	endpointMethods = "POST, OPTIONS"
	resourceMethods = "DELETE, PATCH, OPTIONS"
)

// optionsEndpoint answers OPTIONS on the WHIP endpoint: what it takes
// (Accept-Post) and the CORS preflight. It asks for no token: a preflight
// carries none.
func (s *Server) optionsEndpoint(w http.ResponseWriter, r *http.Request) {
	cors(w.Header(), endpointMethods)
	w.Header().Set("Accept-Post", "application/sdp")
	w.Header().Set("Allow", endpointMethods)
	linkICEServers(w.Header(), s.iceServersFor(r, "whip"))
	w.WriteHeader(http.StatusNoContent)
}

// optionsResource answers OPTIONS on a session.
func (s *Server) optionsResource(w http.ResponseWriter, r *http.Request) {
	cors(w.Header(), resourceMethods)
	w.Header().Set("Allow", resourceMethods)
	w.WriteHeader(http.StatusNoContent)
}

// patchResource refuses trickle ICE and ICE restarts over PATCH: the
// answer to the offer already holds all the server's candidates, and a
// client whose network changed makes a new offer with its resume token.
func (s *Server) patchResource(w http.ResponseWriter, r *http.Request) {
	if s.lookup(w, r) == nil {
		return
	}
	typ := strings.ToLower(strings.TrimSpace(strings.Split(r.Header.Get("Content-Type"), ";")[0]))
	s.fail(w, http.StatusNotImplemented, "trickle ICE (PATCH "+typ+") is not supported: the SDP answer carries every candidate; "+
		"after a network change, POST a new offer with the "+HeaderResumeToken+" header")
}

// iceServersFor returns the ICE servers to tell the client of r: all of
// them when r may know them (the server asks no token, or r carries it),
// else only those without credentials, so that a TURN password does not
// go to whoever asks. user names the client in minted TURN credentials.
func (s *Server) iceServersFor(r *http.Request, user string) []webrtc.ICEServer {
	servers := s.cfg.transport.ICEServers(user)
	if s.carriesToken(r) {
		return servers
	}
	return slices.DeleteFunc(servers, func(srv webrtc.ICEServer) bool { return srv.Credential != "" })
}

// linkICEServers adds a Link header per ICE server URL, as RFC 9725
// section 4.6 has it: a WHIP client configures its peer connection (or
// an ICE restart) with them.
func linkICEServers(h http.Header, servers []webrtc.ICEServer) {
	for _, srv := range servers {
		for _, u := range srv.URLs {
			v := "<" + u + `>; rel="ice-server"`
			if srv.Credential != "" {
				v += "; username=" + quoteParam(srv.Username) + "; credential=" + quoteParam(srv.Credential) + `; credential-type="password"`
			}
			h.Add("Link", v)
		}
	}
}

// quoteParam quotes a Link parameter value (RFC 8288's quoted-string).
func quoteParam(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}
