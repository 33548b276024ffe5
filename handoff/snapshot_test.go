package handoff

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/tools"
)

var testKey = Key{ID: "k1", Secret: []byte("0123456789abcdef0123456789abcdef")}

// allStates is a session whose ledger has a call in every state.
func allStates() Snapshot {
	st := engine.State{
		SessionID: "sess_1", Agent: "front-desk", Epoch: 4, NextCall: 9,
		UserData: map[string]json.RawMessage{"customer": json.RawMessage(`{"name":"Ada"}`)},
	}
	st.Chat = append(st.Chat,
		llm.Item{Kind: llm.KindMessage, Role: llm.RoleUser, Text: "Book a table for two at seven"},
		llm.Item{Kind: llm.KindMessage, Role: llm.RoleAssistant, Text: "Let me check", Interrupted: true, Played: 640 * time.Millisecond})
	states := []tools.State{tools.StateRequested, tools.StateDeferred, tools.StateRunning, tools.StateSucceeded,
		tools.StateFailed, tools.StateCancelled, tools.StateTimedOut, tools.StateUnknown}
	for i, s := range states {
		args := json.RawMessage(`{"party":2,"time":"19:00"}`)
		c := tools.Call{
			ID: "call_" + string(rune('a'+i)), Tool: "book_table", Args: args,
			Key: tools.IdempotencyKey(st.SessionID, "book_table", args), Effect: tools.Mutation,
			Policy: tools.Defer, Epoch: 3, State: s, Ran: s != tools.StateRequested && s != tools.StateDeferred,
		}
		if s.Terminal() {
			c.Output, c.Committed = `{"code":"HB1900"}`, true
		}
		if s == tools.StateTimedOut {
			c.Late = &tools.Outcome{State: tools.StateSucceeded, Output: `{"code":"HB1900"}`}
		}
		st.Calls = append(st.Calls, c)
		st.Chat = append(st.Chat, llm.Item{Kind: llm.KindToolCall, CallID: c.ID, Name: c.Tool, Arguments: args})
	}
	return Snapshot{CreatedAt: time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC), State: st,
		Transport: map[string]string{"kind": "sip", "caller": "sip:+15550100@example.com"}}
}

// Every ledger state survives sealing and opening exactly.
func TestSnapshotRoundTripKeepsEveryLedgerState(t *testing.T) {
	want := allStates()
	data, err := Seal(want, testKey)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Open(data, Key{ID: "old", Secret: []byte("another key, rotated out")}, testKey)
	if err != nil {
		t.Fatal(err)
	}
	want.Version = Version
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip changed the snapshot:\n got %+v\nwant %+v", got, want)
	}
}

// reseal signs a changed body, as a holder of the key could.
func reseal(t *testing.T, data []byte, change func(body map[string]any)) []byte {
	t.Helper()
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(env.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatal(err)
	}
	change(body)
	raw, _ = json.Marshal(body)
	env.Body = base64.RawURLEncoding.EncodeToString(raw)
	env.Sig = base64.RawURLEncoding.EncodeToString(sign(testKey.Secret, raw))
	out, _ := json.Marshal(env)
	return out
}

// Tampered, truncated, wrong-version and incomplete snapshots are refused,
// each with the error that names what is wrong.
func TestBadSnapshotsAreRefusedWithTheReason(t *testing.T) {
	good, err := Seal(allStates(), testKey)
	if err != nil {
		t.Fatal(err)
	}
	state := func(body map[string]any) map[string]any { return body["state"].(map[string]any) }
	for _, tc := range []struct {
		name string
		data []byte
		keys []Key
		want error
		says string
	}{
		{"a byte of the body changed", bytes.Replace(good, []byte(`"body":"ey`), []byte(`"body":"eZ`), 1), nil, ErrSignature, "altered"},
		{"signed with another key", mustSeal(t, allStates(), Key{ID: "k1", Secret: []byte("not the same secret at all")}), nil, ErrSignature, "altered"},
		{"truncated", good[:len(good)/2], nil, ErrMalformed, "not a sealed snapshot"},
		{"empty", nil, nil, ErrMalformed, ""},
		{"not JSON", []byte("holdline"), nil, ErrMalformed, ""},
		{"trailing data", append(append([]byte{}, good...), []byte(` {}`)...), nil, ErrMalformed, "data after"},
		{"envelope version 2", bytes.Replace(good, []byte(`"v":1`), []byte(`"v":2`), 1), nil, ErrVersion, "2"},
		{"body version 2", reseal(t, good, func(b map[string]any) { b["version"] = 2 }), nil, ErrVersion, "body says 2"},
		{"unknown key id", good, []Key{{ID: "k2", Secret: testKey.Secret}}, ErrNoKey, `"k1"`},
		{"no session id", reseal(t, good, func(b map[string]any) { delete(state(b), "session_id") }), nil, ErrInvalid, "state.session_id"},
		{"no agent", reseal(t, good, func(b map[string]any) { state(b)["agent"] = "" }), nil, ErrInvalid, "state.agent"},
		{"no created_at", reseal(t, good, func(b map[string]any) { delete(b, "created_at") }), nil, ErrInvalid, "created_at"},
		{"a call without its idempotency key", reseal(t, good, func(b map[string]any) {
			delete(state(b)["calls"].([]any)[2].(map[string]any), "key")
		}), nil, ErrInvalid, "state.calls[2].key"},
		{"a call in no known state", reseal(t, good, func(b map[string]any) {
			state(b)["calls"].([]any)[0].(map[string]any)["state"] = "half-done"
		}), nil, ErrInvalid, "state.calls[0].state"},
		{"a tool call item without its call", reseal(t, good, func(b map[string]any) {
			state(b)["calls"] = state(b)["calls"].([]any)[1:]
		}), nil, ErrInvalid, "state.chat[2].call_id"},
		{"an unknown field", reseal(t, good, func(b map[string]any) { b["surprise"] = true }), nil, ErrInvalid, "surprise"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := tc.keys
			if keys == nil {
				keys = []Key{testKey}
			}
			s, err := Open(tc.data, keys...)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open: %v; want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			if !reflect.DeepEqual(s, Snapshot{}) {
				t.Errorf("a refused snapshot came back half-loaded: %+v", s)
			}
		})
	}
}

func mustSeal(t *testing.T, s Snapshot, k Key) []byte {
	t.Helper()
	b, err := Seal(s, k)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Sealing refuses a short key and a snapshot that could not be resumed.
func TestSealRefusesWhatCouldNotBeOpened(t *testing.T) {
	if _, err := Seal(allStates(), Key{ID: "k", Secret: []byte("short")}); !errors.Is(err, ErrNoKey) {
		t.Errorf("short key: %v", err)
	}
	s := allStates()
	s.State.Agent = ""
	if _, err := Seal(s, testKey); !errors.Is(err, ErrInvalid) {
		t.Errorf("no agent: %v", err)
	}
}

// Whatever the bytes, Open neither panics nor returns a snapshot that
// fails its own checks; what it accepts seals and opens to the same.
func FuzzOpen(f *testing.F) {
	good, _ := Seal(allStates(), testKey)
	f.Add(good)
	f.Add([]byte(`{"v":1,"alg":"HS256","kid":"k1","body":"","sig":""}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Open(data, testKey)
		if err != nil {
			return
		}
		if err := s.validate(); err != nil {
			t.Fatalf("Open accepted an invalid snapshot: %v", err)
		}
		again, err := Seal(s, testKey)
		if err != nil {
			t.Fatalf("an opened snapshot does not seal: %v", err)
		}
		if _, err := Open(again, testKey); err != nil {
			t.Fatalf("resealed snapshot does not open: %v", err)
		}
	})
}

// The body decoder behind a valid signature: a key holder's bytes, however
// odd, are refused with a reason or opened whole.
func FuzzOpenSignedBody(f *testing.F) {
	good := allStates()
	good.Version = Version
	body, _ := json.Marshal(good)
	f.Add(body)
	f.Add([]byte(`{"version":1,"created_at":"2026-11-24T03:00:00Z","state":{"session_id":"s","agent":"a","epoch":0,"next_call":0,"chat":null,"calls":null}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		env, _ := json.Marshal(envelope{V: Version, Alg: "HS256", KID: testKey.ID,
			Body: base64.RawURLEncoding.EncodeToString(body),
			Sig:  base64.RawURLEncoding.EncodeToString(sign(testKey.Secret, body))})
		s, err := Open(env, testKey)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrVersion) {
				t.Fatalf("a signed body was refused as %v", err)
			}
			return
		}
		if err := s.validate(); err != nil {
			t.Fatalf("Open accepted an invalid snapshot: %v", err)
		}
	})
}
