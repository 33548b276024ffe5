package sip

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/icholy/digest"
)

// nonceTTL is how long a digest challenge's nonce may be answered.
const nonceTTL = 5 * time.Minute

// WithDigestAuth makes callers authenticate (RFC 3261 22, digest with MD5
// and qop=auth): an INVITE without credentials gets 401 and a challenge,
// one with wrong credentials 403. For trunks that authenticate their
// calls; the password is never logged.
func WithDigestAuth(realm, user, password string) Option {
	return func(c *config) error {
		if realm == "" || user == "" || password == "" {
			return fmt.Errorf("sip: digest auth needs a realm, a user and a password")
		}
		c.auth = &digestAuth{realm: realm, user: user, password: password, nonces: map[string]time.Time{}}
		return nil
	}
}

// digestAuth checks INVITEs' Authorization headers against one user.
type digestAuth struct {
	realm, user, password string

	mu     sync.Mutex
	nonces map[string]time.Time // issued, with their expiry
}

// authVerdict is what check decided.
type authVerdict int

const (
	authOK        authVerdict = iota
	authChallenge             // no usable credentials: 401 with a challenge
	authStale                 // a nonce that expired: 401, stale=true
	authForbidden             // wrong user or response: 403
)

// check judges an Authorization header value for method.
func (a *digestAuth) check(method, header string) authVerdict {
	if header == "" {
		return authChallenge
	}
	creds, err := digest.ParseCredentials(header)
	if err != nil {
		return authChallenge
	}
	a.mu.Lock()
	expiry, known := a.nonces[creds.Nonce]
	a.mu.Unlock()
	switch {
	case !known:
		return authChallenge
	case time.Now().After(expiry):
		return authStale
	case creds.Username != a.user || creds.Realm != a.realm:
		return authForbidden
	}
	chal := &digest.Challenge{Realm: a.realm, Nonce: creds.Nonce, Algorithm: creds.Algorithm, Opaque: creds.Opaque}
	if creds.QOP != "" {
		chal.QOP = []string{creds.QOP}
	}
	want, err := digest.Digest(chal, digest.Options{Method: method, URI: creds.URI, Username: a.user, Password: a.password, Cnonce: creds.Cnonce, Count: creds.Nc})
	if err != nil || subtle.ConstantTimeCompare([]byte(strings.ToLower(want.Response)), []byte(strings.ToLower(creds.Response))) != 1 {
		return authForbidden
	}
	return authOK
}

// challenge issues a fresh nonce and returns the WWW-Authenticate value.
func (a *digestAuth) challenge(stale bool) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	nonce := hex.EncodeToString(b[:])
	now := time.Now()
	a.mu.Lock()
	for n, exp := range a.nonces {
		if now.After(exp) {
			delete(a.nonces, n)
		}
	}
	a.nonces[nonce] = now.Add(nonceTTL)
	a.mu.Unlock()
	return (&digest.Challenge{Realm: a.realm, Nonce: nonce, Algorithm: "MD5", QOP: []string{"auth"}, Stale: stale}).String()
}
