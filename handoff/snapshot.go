package handoff

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/tools"
)

// Version is the snapshot format this package writes and reads.
const Version = 1

// Errors Open returns, wrapped with the detail; callers branch on them.
var (
	ErrMalformed = errors.New("handoff: not a sealed snapshot")
	ErrSignature = errors.New("handoff: bad signature")
	ErrVersion   = errors.New("handoff: unknown snapshot version")
	ErrInvalid   = errors.New("handoff: invalid snapshot")
	// ErrNoKey: Seal or Open without a key, or with one too short to
	// sign with.
	ErrNoKey = errors.New("handoff: no signing key")
)

// MinKeyLen is the shortest signing key accepted, in bytes.
const MinKeyLen = 16

// Snapshot is a session on its way out of its process.
type Snapshot struct {
	Version   int          `json:"version"`
	CreatedAt time.Time    `json:"created_at"`
	State     engine.State `json:"state"`
	// Transport holds routing facts for the transport that picks the
	// session up (the kind of line, a caller's number): never secrets.
	Transport map[string]string `json:"transport,omitempty"`
}

// Key signs and verifies snapshots. ID names it in sealed snapshots so
// that keys can be rotated: Open tries the key whose ID matches.
type Key struct {
	ID     string
	Secret []byte
}

// envelope is a sealed snapshot.
type envelope struct {
	V    int    `json:"v"`
	Alg  string `json:"alg"`
	KID  string `json:"kid"`
	Body string `json:"body"`
	Sig  string `json:"sig"`
}

const sigContext = "holdline-snapshot.v1."

// Seal validates s, stamps its version, and signs it with k.
func Seal(s Snapshot, k Key) ([]byte, error) {
	if len(k.Secret) < MinKeyLen {
		return nil, fmt.Errorf("%w: the key must be at least %d bytes", ErrNoKey, MinKeyLen)
	}
	s.Version = Version
	if s.CreatedAt.IsZero() {
		s.CreatedAt = time.Now().UTC()
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	body, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("handoff: encoding the snapshot: %w", err)
	}
	return json.Marshal(envelope{
		V: Version, Alg: "HS256", KID: k.ID,
		Body: base64.RawURLEncoding.EncodeToString(body),
		Sig:  base64.RawURLEncoding.EncodeToString(sign(k.Secret, body)),
	})
}

// Open verifies data with the key among keys whose ID it names and
// returns the snapshot, whole, or an error wrapping ErrMalformed,
// ErrSignature, ErrVersion, ErrInvalid or ErrNoKey that says what is
// wrong.
func Open(data []byte, keys ...Key) (Snapshot, error) {
	var env envelope
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return Snapshot{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if dec.More() {
		return Snapshot{}, fmt.Errorf("%w: data after the snapshot", ErrMalformed)
	}
	if env.V != Version {
		return Snapshot{}, fmt.Errorf("%w: %d (this build reads %d)", ErrVersion, env.V, Version)
	}
	if env.Alg != "HS256" {
		return Snapshot{}, fmt.Errorf("%w: signature algorithm %q (want HS256)", ErrSignature, env.Alg)
	}
	var key *Key
	for i := range keys {
		if keys[i].ID == env.KID {
			key = &keys[i]
			break
		}
	}
	if key == nil || len(key.Secret) < MinKeyLen {
		return Snapshot{}, fmt.Errorf("%w: none for key id %q", ErrNoKey, env.KID)
	}
	body, err := base64.RawURLEncoding.DecodeString(env.Body)
	if err != nil {
		return Snapshot{}, fmt.Errorf("%w: body: %v", ErrMalformed, err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(env.Sig)
	if err != nil {
		return Snapshot{}, fmt.Errorf("%w: signature: %v", ErrMalformed, err)
	}
	if !hmac.Equal(sig, sign(key.Secret, body)) {
		return Snapshot{}, fmt.Errorf("%w: the snapshot was altered or signed with another key", ErrSignature)
	}
	var s Snapshot
	dec = json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Snapshot{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if s.Version != Version {
		return Snapshot{}, fmt.Errorf("%w: body says %d (this build reads %d)", ErrVersion, s.Version, Version)
	}
	if err := s.validate(); err != nil {
		return Snapshot{}, err
	}
	return s, nil
}

func sign(secret, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(sigContext))
	m.Write(body)
	return m.Sum(nil)
}

// validate checks what a session needs to resume from the snapshot, and
// says which field fails.
func (s *Snapshot) validate() error {
	st := &s.State
	bad := func(field, why string) error { return fmt.Errorf("%w: %s %s", ErrInvalid, field, why) }
	switch {
	case s.CreatedAt.IsZero():
		return bad("created_at", "is missing")
	case st.SessionID == "":
		return bad("state.session_id", "is missing")
	case st.Agent == "":
		return bad("state.agent", "is missing")
	case st.NextCall < 0:
		return bad("state.next_call", "is negative")
	}
	ids := map[string]bool{}
	for i, c := range st.Calls {
		field := fmt.Sprintf("state.calls[%d]", i)
		switch {
		case c.ID == "":
			return bad(field+".id", "is missing")
		case ids[c.ID]:
			return bad(field+".id", fmt.Sprintf("%q appears twice", c.ID))
		case c.Tool == "":
			return bad(field+".tool", "is missing")
		case c.Key == "":
			return bad(field+".key", "is missing (the idempotency key)")
		case !knownState(c.State):
			return bad(field+".state", fmt.Sprintf("%q is not a call state", c.State))
		case c.Effect != tools.Read && c.Effect != tools.Mutation:
			return bad(field+".effect", fmt.Sprintf("%q is not read or mutation", c.Effect))
		case len(c.Args) > 0 && !json.Valid(c.Args):
			return bad(field+".args", "is not JSON")
		case c.Epoch > st.Epoch:
			return bad(field+".epoch", fmt.Sprintf("%d is after the state's epoch %d", c.Epoch, st.Epoch))
		}
		ids[c.ID] = true
	}
	for i, it := range st.Chat {
		field := fmt.Sprintf("state.chat[%d]", i)
		switch it.Kind {
		case llm.KindMessage:
			if it.Role != llm.RoleUser && it.Role != llm.RoleAssistant {
				return bad(field+".role", fmt.Sprintf("%q is not user or assistant", it.Role))
			}
		case llm.KindToolCall:
			if !ids[it.CallID] {
				return bad(field+".call_id", fmt.Sprintf("%q is not among the calls", it.CallID))
			}
		case llm.KindToolResult:
		default:
			return bad(field+".kind", fmt.Sprintf("%q is not an item kind", it.Kind))
		}
	}
	for k, v := range st.UserData {
		if !json.Valid(v) {
			return bad("state.user_data."+k, "is not JSON")
		}
	}
	return nil
}

func knownState(s tools.State) bool {
	switch s {
	case tools.StateRequested, tools.StateDeferred, tools.StateRunning, tools.StateSucceeded,
		tools.StateFailed, tools.StateCancelled, tools.StateTimedOut, tools.StateUnknown:
		return true
	}
	return false
}
