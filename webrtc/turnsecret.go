package webrtc

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultTURNCredentialTTL is how long minted TURN credentials last when
// WithTURNSecret is given none: a day, longer than any call and its resume
// window, as coturn's own examples have it.
const DefaultTURNCredentialTTL = 24 * time.Hour

// turnSecret mints time-limited TURN credentials with a secret shared with
// the TURN server: coturn's use-auth-secret (the "TURN REST API" scheme).
// A leaked credential works only until its expiry, and the secret itself
// never leaves the server.
type turnSecret struct {
	urls   []string
	secret []byte
	ttl    time.Duration
}

// WithTURNSecret has peers and clients use a TURN server that shares
// secret with Holdline (coturn's static-auth-secret with use-auth-secret).
// Each peer, and each client Transport.ICEServers is asked for, gets its
// own credentials: the username "EXPIRY:USER" and the password
// base64(HMAC-SHA1(secret, username)), valid for ttl (zero: a day). Make
// ttl longer than a call plus its resume window: a relay cannot be
// refreshed with an expired credential.
func WithTURNSecret(secret string, ttl time.Duration, urls ...string) Option {
	return func(c *transportConfig) error {
		if secret == "" {
			return errors.New("webrtc: TURN secret is empty")
		}
		if ttl < 0 {
			return fmt.Errorf("webrtc: TURN credential lifetime %v", ttl)
		}
		if ttl == 0 {
			ttl = DefaultTURNCredentialTTL
		}
		if len(urls) == 0 {
			return errors.New("webrtc: a TURN secret with no turn: URL to use it on")
		}
		for _, u := range urls {
			scheme, _, _ := strings.Cut(u, ":")
			if scheme != "turn" && scheme != "turns" {
				return fmt.Errorf("webrtc: %q is not a turn: or turns: URL (a TURN secret is for TURN servers)", u)
			}
		}
		// The URLs are checked as a minted server would be.
		if err := (ICEServer{URLs: urls, Username: "0:check", Credential: "check"}).check(); err != nil {
			return fmt.Errorf("webrtc: %w", err)
		}
		c.turn = &turnSecret{urls: slices.Clone(urls), secret: []byte(secret), ttl: ttl}
		return nil
	}
}

// mint returns the TURN server with credentials for user, valid from now
// for the secret's lifetime.
func (s *turnSecret) mint(user string, now time.Time) ICEServer {
	username, credential := TURNCredentials(string(s.secret), user, now.Add(s.ttl))
	return ICEServer{URLs: slices.Clone(s.urls), Username: username, Credential: credential}
}

// TURNCredentials returns the username and password a TURN server with
// use-auth-secret accepts from user until expires: "EXPIRY:USER" (EXPIRY
// in Unix seconds) and base64(HMAC-SHA1(secret, username)). A colon in
// user is replaced, since the server splits the username at the first one.
func TURNCredentials(secret, user string, expires time.Time) (username, credential string) {
	username = strconv.FormatInt(expires.Unix(), 10)
	if user != "" {
		username += ":" + strings.ReplaceAll(user, ":", "_")
	}
	mac := hmac.New(sha1.New, []byte(secret))
	mac.Write([]byte(username))
	return username, base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// ICEServers returns the STUN and TURN servers a client of this transport
// should use, as it would give them to RTCPeerConnection: those given with
// WithICEServers and WithICEServer, and with WithTURNSecret the TURN
// server with credentials minted for user. Nil when none are set.
func (t *Transport) ICEServers(user string) []ICEServer {
	out := slices.Clone(t.cfg.servers)
	if t.cfg.turn != nil {
		out = append(out, t.cfg.turn.mint(user, time.Now()))
	}
	return out
}
