package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
)

// accessTokenParam is the query parameter that may carry the bearer token
// (RFC 6750 section 2.3) where a browser cannot send headers.
const accessTokenParam = "access_token"

// Reasons a request is refused for its credentials. Clients can tell the
// two 401s apart by WWW-Authenticate too: a wrong token carries
// error="invalid_token" (RFC 6750 section 3.1), a missing one no error.
const (
	reasonTokenMissing = "a bearer token is required (Authorization: Bearer $HOLDLINE_TOKEN)"
	reasonTokenWrong   = "the bearer token does not match this server's (HOLDLINE_TOKEN)"
)

// authMode is where a route may take the token from.
type authMode int

const (
	headerOnly authMode = iota
	// headerOrQuery also takes ?access_token=: only for the event stream,
	// because a browser's EventSource cannot send headers. Elsewhere a
	// token in the URL would end up in access logs and browser history for
	// nothing.
	headerOrQuery
)

// authorized wraps h with the bearer-token check when a token is set.
func (s *Server) authorized(mode authMode, h http.HandlerFunc) http.HandlerFunc {
	if s.cfg.token == "" {
		return h
	}
	// Compared as digests: equal length whatever was sent, so the time
	// taken says nothing about the token's length or its bytes.
	want := sha256.Sum256([]byte(s.cfg.token))
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		inQuery := q.Has(accessTokenParam)
		if inQuery && mode != headerOrQuery {
			s.fail(w, http.StatusBadRequest, fmt.Sprintf("?%s= is accepted only on the event stream (GET /v1/sessions/{id}/events), where a browser cannot send headers; send Authorization: Bearer here", accessTokenParam))
			return
		}
		got, present, err := bearer(r.Header.Get("Authorization"))
		if err != "" {
			s.unauthorized(w, err, "invalid_request")
			return
		}
		if !present && inQuery {
			got, present = q.Get(accessTokenParam), q.Get(accessTokenParam) != ""
		}
		if !present {
			s.unauthorized(w, reasonTokenMissing, "")
			return
		}
		if !sameToken(got, want) {
			s.unauthorized(w, reasonTokenWrong, "invalid_token")
			return
		}
		h(w, r)
	}
}

// sameToken compares a token with the digest of the server's.
func sameToken(got string, want [sha256.Size]byte) bool {
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], want[:]) == 1
}

// carriesToken reports whether r holds the server's token in its
// Authorization header, or the server asks for none: for routes open to
// anyone that say more to those who hold it.
func (s *Server) carriesToken(r *http.Request) bool {
	if s.cfg.token == "" {
		return true
	}
	got, present, problem := bearer(r.Header.Get("Authorization"))
	return present && problem == "" && sameToken(got, sha256.Sum256([]byte(s.cfg.token)))
}

// bearer takes the token from an Authorization header. The scheme is
// matched without regard to case (RFC 7235 section 2.1). present is false
// when there is no header or no token in it; problem is set for a header
// that is there but is not a bearer token.
func bearer(header string) (token string, present bool, problem string) {
	header = strings.TrimSpace(header)
	if header == "" {
		return "", false, ""
	}
	scheme, cred, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false, fmt.Sprintf("the Authorization scheme is %q; send Authorization: Bearer $HOLDLINE_TOKEN", scheme)
	}
	cred = strings.TrimSpace(cred)
	return cred, cred != "", ""
}

// unauthorized answers 401 with a challenge; code is RFC 6750's error
// code, empty when no credentials came at all.
func (s *Server) unauthorized(w http.ResponseWriter, reason, code string) {
	challenge := `Bearer realm="holdline"`
	if code != "" {
		challenge += `, error="` + code + `"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	s.fail(w, http.StatusUnauthorized, reason)
}
