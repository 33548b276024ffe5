package server

import (
	"net/http"
	"strings"
)

// WHIP (RFC 9725): a session is a WHIP resource. The endpoint answers a
// CORS preflight and the OPTIONS a WHIP client sends before its offer; a
// session ends with DELETE (200, as the RFC's flow has it); trickle ICE
// over PATCH is not taken, because the answer carries every candidate the
// server has (501, as RFC 9725 4.3.1 allows for the whole resource).

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
