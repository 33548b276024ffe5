package carrier

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
)

// Param names the transport looks for in Event.Params, whatever the
// carrier: the webhook's answer puts them there (TelnyxTeXML, PlivoXML),
// and a carrier that names the call's parties itself (Telnyx's start)
// fills "from" and "to" where the answer did not.
const (
	// ParamToken is the one-time stream token the webhook's answer
	// carried: the transport takes the stream only if it matches.
	ParamToken = "token"
	// ParamFrom is the caller's number.
	ParamFrom = "from"
	// ParamTo is the number called.
	ParamTo = "to"
)

// A StreamError is an error a carrier reported on the stream itself
// (Telnyx's error frame), which Decode returns as its error. It is neither
// ErrMalformed nor ErrUnknownEvent, and the stream goes on: the carrier
// says what it could not do with a frame it was sent, not that the call is
// over. The transport logs it and counts it.
type StreamError struct {
	Carrier, StreamID string
	// Code, Title and Detail are the carrier's.
	Code, Title, Detail string
}

func (e *StreamError) Error() string {
	return fmt.Sprintf("carrier: %s reports an error on stream %q: code %s: %s: %s",
		e.Carrier, e.StreamID, e.Code, e.Title, e.Detail)
}

// malformed returns an error wrapping ErrMalformed that says, after the
// carrier's name, what is wrong.
func malformed(carrier, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrMalformed, carrier, fmt.Sprintf(format, args...))
}

// unknownEvent returns an error wrapping ErrUnknownEvent.
func unknownEvent(carrier, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrUnknownEvent, carrier, fmt.Sprintf(format, args...))
}

// eventOf returns a message's event, reading nothing else: a message the
// protocol does not define is unknown whatever the rest of it holds.
func eventOf(carrier string, msg []byte) (string, error) {
	var head struct {
		Event string `json:"event"`
	}
	if err := json.Unmarshal(msg, &head); err != nil {
		return "", malformed(carrier, "bad JSON: %v", err)
	}
	if head.Event == "" {
		return "", malformed(carrier, "no event")
	}
	return head.Event, nil
}

// decodeFrame reads a message whose event is known into f.
func decodeFrame(carrier string, msg []byte, f any) error {
	if err := json.Unmarshal(msg, f); err != nil {
		return malformed(carrier, "bad JSON: %v", err)
	}
	return nil
}

// jsonInt reads an integer that a carrier sends as a JSON number or as a
// string holding one: both do both (Telnyx's "sequence_number": "1",
// Plivo's "sequenceNumber": 1 and "timestamp": "1705312200000"). Null and
// "" read as 0.
type jsonInt int64

func (n *jsonInt) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	s := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s == "" {
			return nil
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("not an integer: %.40s", b)
	}
	*n = jsonInt(v)
	return nil
}

// jsonText reads a JSON string, or the text of any other scalar (an error
// code sent as 100002 or "100002"), so that a field's type is not a reason
// to lose the message.
type jsonText string

func (t *jsonText) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = jsonText(s)
		return nil
	}
	if len(b) > 0 && (b[0] == '{' || b[0] == '[') {
		return fmt.Errorf("not a scalar: %.40s", b)
	}
	*t = jsonText(b)
	return nil
}

// params copies a carrier's custom parameters, a JSON object whose values
// should be strings; a value that is not (a number, a boolean) keeps its
// JSON text rather than failing the start.
func params(m map[string]jsonText) map[string]string {
	out := make(map[string]string, len(m)+2)
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

// decodeAudio decodes a media payload: standard base64, padded as both
// carriers send it, or unpadded as a lenient sender might.
func decodeAudio(carrier, payload string) ([]byte, error) {
	if payload == "" {
		return nil, malformed(carrier, "media without a payload")
	}
	audio, err := base64.StdEncoding.DecodeString(payload)
	if err != nil && len(payload)%4 != 0 {
		audio, err = base64.RawStdEncoding.DecodeString(payload)
	}
	if err != nil {
		return nil, malformed(carrier, "media payload is not base64: %v", err)
	}
	return audio, nil
}
