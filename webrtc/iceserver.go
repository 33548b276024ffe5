package webrtc

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	pion "github.com/pion/webrtc/v4"
)

// ICEServer is a STUN or TURN server, as the W3C RTCIceServer dictionary
// has it: a TURN server needs a username and a credential (a password).
type ICEServer struct {
	URLs       []string `json:"urls"`
	Username   string   `json:"username,omitempty"`
	Credential string   `json:"credential,omitempty"`
}

// check says what is wrong with s, without its credential.
func (s ICEServer) check() error {
	if len(s.URLs) == 0 {
		return errors.New("an ICE server with no urls")
	}
	for _, u := range s.URLs {
		scheme, rest, _ := strings.Cut(u, ":")
		switch scheme {
		case "stun", "stuns":
		case "turn", "turns":
			if s.Username == "" || s.Credential == "" {
				return fmt.Errorf("%s needs a username and a credential", u)
			}
		default:
			return fmt.Errorf("%q is not a stun:, stuns:, turn: or turns: URL", u)
		}
		if strings.Contains(rest, "@") {
			return fmt.Errorf("%s: give the username and credential as their own fields, not in the URL", scheme+":…")
		}
	}
	return nil
}

func (s ICEServer) pion() pion.ICEServer {
	out := pion.ICEServer{URLs: s.URLs, Username: s.Username}
	if s.Credential != "" {
		out.Credential, out.CredentialType = s.Credential, pion.ICECredentialTypePassword
	}
	return out
}

// WithICEServer sets STUN and TURN servers, with their credentials, that
// peers gather candidates with: a server behind a NAT that only a relay
// crosses needs a TURN server.
func WithICEServer(servers ...ICEServer) Option {
	return func(c *transportConfig) error {
		for _, s := range servers {
			if err := s.check(); err != nil {
				return fmt.Errorf("webrtc: %w", err)
			}
			s.URLs = slices.Clone(s.URLs)
			c.servers = append(c.servers, s)
		}
		return nil
	}
}

// ParseICEServers reads ICE servers in the W3C RTCIceServer JSON form a
// browser takes, `[{"urls": ["turn:host:3478"], "username": "u",
// "credential": "p"}]`, where "urls" may also be one string.
func ParseICEServers(data []byte) ([]ICEServer, error) {
	var raw []struct {
		URLs       json.RawMessage `json:"urls"`
		Username   string          `json:"username"`
		Credential string          `json:"credential"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("webrtc: ICE servers: want a JSON array of {\"urls\", \"username\", \"credential\"}: %w", err)
	}
	out := make([]ICEServer, 0, len(raw))
	for i, r := range raw {
		s := ICEServer{Username: r.Username, Credential: r.Credential}
		var one string
		if err := json.Unmarshal(r.URLs, &one); err == nil {
			s.URLs = []string{one}
		} else if err := json.Unmarshal(r.URLs, &s.URLs); err != nil {
			return nil, fmt.Errorf("webrtc: ICE server %d: \"urls\" is neither a string nor an array of strings", i)
		}
		if err := s.check(); err != nil {
			return nil, fmt.Errorf("webrtc: ICE server %d: %w", i, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// pionServers are the ICE servers of one new peer: the fixed ones, and a
// TURN server with credentials minted for it.
func (t *Transport) pionServers() []pion.ICEServer {
	servers := t.ICEServers("holdline")
	out := make([]pion.ICEServer, len(servers))
	for i, s := range servers {
		out[i] = s.pion()
	}
	return out
}
