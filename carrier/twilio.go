package carrier

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
)

// Twilio is the Codec of Twilio's Media Streams (a bidirectional stream,
// opened by <Connect><Stream>), as Twilio documents its WebSocket
// messages: connected, start, media, dtmf, mark and stop come in; media,
// mark and clear go out.
var Twilio Codec = twilio{}

type twilio struct{}

// Name is "twilio".
func (twilio) Name() string { return "twilio" }

// twilioMsg is every message Twilio sends, with the fields of each event
// in a member of its own.
type twilioMsg struct {
	Event          string `json:"event"`
	SequenceNumber string `json:"sequenceNumber"`
	StreamSid      string `json:"streamSid"`
	Start          *struct {
		StreamSid        string            `json:"streamSid"`
		CallSid          string            `json:"callSid"`
		AccountSid       string            `json:"accountSid"`
		CustomParameters map[string]string `json:"customParameters"`
		MediaFormat      struct {
			Encoding   string `json:"encoding"`
			SampleRate int    `json:"sampleRate"`
			Channels   int    `json:"channels"`
		} `json:"mediaFormat"`
	} `json:"start"`
	Media *struct {
		Track     string `json:"track"`
		Chunk     string `json:"chunk"`
		Timestamp string `json:"timestamp"`
		Payload   string `json:"payload"`
	} `json:"media"`
	DTMF *struct {
		Digit string `json:"digit"`
	} `json:"dtmf"`
	Mark *struct {
		Name string `json:"name"`
	} `json:"mark"`
	Stop *struct {
		CallSid string `json:"callSid"`
	} `json:"stop"`
}

// maxPayload bounds one media message's audio: a second of mu-law.
// Twilio sends 20 ms; anything near this is not a phone line's audio.
const maxPayload = 8000

// Decode reads one message from Twilio.
func (twilio) Decode(msg []byte) (Event, error) {
	var m twilioMsg
	if err := json.Unmarshal(msg, &m); err != nil {
		return Event{}, fmt.Errorf("%w: not JSON: %v", ErrMalformed, err)
	}
	ev := Event{StreamID: m.StreamSid}
	if m.SequenceNumber != "" {
		n, err := strconv.ParseInt(m.SequenceNumber, 10, 64)
		if err != nil {
			return Event{}, fmt.Errorf("%w: sequenceNumber %q", ErrMalformed, m.SequenceNumber)
		}
		ev.Seq = n
	}
	switch m.Event {
	case "connected":
		ev.Kind = Connected
	case "start":
		ev.Kind = Start
		if m.Start == nil {
			return Event{}, fmt.Errorf("%w: start without its start object", ErrMalformed)
		}
		s := m.Start
		if s.StreamSid != "" {
			ev.StreamID = s.StreamSid
		}
		if ev.StreamID == "" || s.CallSid == "" {
			return Event{}, fmt.Errorf("%w: start without streamSid or callSid", ErrMalformed)
		}
		ev.CallID, ev.Params = s.CallSid, s.CustomParameters
		ev.Encoding, ev.Rate = s.MediaFormat.Encoding, s.MediaFormat.SampleRate
	case "media":
		ev.Kind = Media
		if m.Media == nil || m.Media.Payload == "" {
			return Event{}, fmt.Errorf("%w: media without a payload", ErrMalformed)
		}
		if base64.StdEncoding.DecodedLen(len(m.Media.Payload)) > maxPayload+2 {
			return Event{}, fmt.Errorf("%w: media payload of %d base64 characters (over a second of audio)", ErrMalformed, len(m.Media.Payload))
		}
		audio, err := base64.StdEncoding.DecodeString(m.Media.Payload)
		if err != nil {
			return Event{}, fmt.Errorf("%w: media payload is not base64: %v", ErrMalformed, err)
		}
		ev.Audio = audio
		if m.Media.Timestamp != "" {
			ts, err := strconv.ParseInt(m.Media.Timestamp, 10, 64)
			if err != nil {
				return Event{}, fmt.Errorf("%w: media timestamp %q", ErrMalformed, m.Media.Timestamp)
			}
			ev.Timestamp = ts
		}
	case "dtmf":
		ev.Kind = DTMF
		if m.DTMF == nil || len(m.DTMF.Digit) != 1 {
			return Event{}, fmt.Errorf("%w: dtmf without a single digit", ErrMalformed)
		}
		ev.Digit = m.DTMF.Digit
	case "mark":
		ev.Kind = Mark
		if m.Mark == nil || m.Mark.Name == "" {
			return Event{}, fmt.Errorf("%w: mark without a name", ErrMalformed)
		}
		ev.Mark = m.Mark.Name
	case "stop":
		ev.Kind = Stop
		if m.Stop != nil {
			ev.CallID = m.Stop.CallSid
		}
	case "":
		return Event{}, fmt.Errorf("%w: no event", ErrMalformed)
	default:
		return Event{}, fmt.Errorf("%w: %q", ErrUnknownEvent, m.Event)
	}
	return ev, nil
}

// Media encodes the agent's audio for Twilio to play. It is built by hand,
// the payload base64-encoded in place: it goes out fifty times a second
// on every call.
func (twilio) Media(streamID string, audio []byte) ([]byte, error) {
	sid, err := json.Marshal(streamID)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 64+len(sid)+base64.StdEncoding.EncodedLen(len(audio)))
	b = append(b, `{"event":"media","streamSid":`...)
	b = append(b, sid...)
	b = append(b, `,"media":{"payload":"`...)
	b = base64.StdEncoding.AppendEncode(b, audio)
	b = append(b, `"}}`...)
	return b, nil
}

// Mark asks Twilio to return name once the audio sent before it has played.
func (twilio) Mark(streamID, name string) ([]byte, error) {
	type mark struct {
		Name string `json:"name"`
	}
	return json.Marshal(struct {
		Event     string `json:"event"`
		StreamSid string `json:"streamSid"`
		Mark      mark   `json:"mark"`
	}{"mark", streamID, mark{name}})
}

// Clear asks Twilio to drop the audio it holds; it returns the pending
// marks.
func (twilio) Clear(streamID string) ([]byte, error) {
	return json.Marshal(struct {
		Event     string `json:"event"`
		StreamSid string `json:"streamSid"`
	}{"clear", streamID})
}
