package carrier

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Plivo is the Codec for Plivo's audio streams, as a Plivo application's
// answer <Stream bidirectional="true"> opens them (PlivoXML writes that
// answer).
//
// Plivo sends start, media, dtmf, playedStream and clearedAudio frames. It
// sends no connected frame, and ends the stream by closing the socket (a
// stop frame, which older pages show, is read as Stop all the same). The
// start names the call and the stream inside it (start.callId,
// start.streamId) but not the caller: the answer's parameters come back in
// extra_headers, a string of name=value pairs, which Decode parses into
// Params. Plivo's media timestamps are wall-clock (Unix milliseconds), not
// the stream's, so Decode leaves Event.Timestamp zero and gives the
// sequence number only.
//
// Media sends playAudio frames of mu-law at 8000 Hz, Mark a checkpoint and
// Clear a clearAudio, each naming the stream. Plivo answers a checkpoint,
// once the audio before it is played, with playedStream ("played" on some
// of its pages), which Decode returns as a Mark; it answers a clearAudio
// with clearedAudio, returned as Cleared. The checkpoints pending at a
// clear are dropped unanswered: the Cleared is their answer.
var Plivo Codec = plivo{}

type plivo struct{}

func (plivo) Name() string { return "plivo" }

// plivoHead is what every frame Plivo sends has.
type plivoHead struct {
	Seq      jsonInt `json:"sequenceNumber"`
	StreamID string  `json:"streamId"`
}

func (plivo) Decode(msg []byte) (Event, error) {
	const name = "plivo"
	event, err := eventOf(name, msg)
	if err != nil {
		return Event{}, err
	}
	switch event {
	case "start":
		var f struct {
			plivoHead
			Start *struct {
				CallID      string `json:"callId"`
				StreamID    string `json:"streamId"`
				MediaFormat struct {
					Encoding   string  `json:"encoding"`
					SampleRate jsonInt `json:"sampleRate"`
				} `json:"mediaFormat"`
				ExtraHeaders json.RawMessage `json:"extra_headers"`
			} `json:"start"`
			ExtraHeaders json.RawMessage `json:"extra_headers"`
		}
		if err := decodeFrame(name, msg, &f); err != nil {
			return Event{}, err
		}
		if f.Start == nil {
			return Event{}, malformed(name, "start without its start object")
		}
		stream := f.Start.StreamID
		if stream == "" {
			stream = f.StreamID
		}
		if stream == "" {
			return Event{}, malformed(name, "start without a streamId")
		}
		headers := f.ExtraHeaders
		if len(headers) == 0 {
			headers = f.Start.ExtraHeaders
		}
		p, err := plivoExtraHeaders(headers)
		if err != nil {
			return Event{}, malformed(name, "start: %v", err)
		}
		return Event{
			Kind: Start, StreamID: stream, Seq: int64(f.Seq),
			CallID:   f.Start.CallID,
			Encoding: f.Start.MediaFormat.Encoding,
			Rate:     int(f.Start.MediaFormat.SampleRate),
			Params:   p,
		}, nil
	case "media":
		var f struct {
			plivoHead
			Media *struct {
				Track   string `json:"track"`
				Payload string `json:"payload"`
			} `json:"media"`
		}
		if err := decodeFrame(name, msg, &f); err != nil {
			return Event{}, err
		}
		if f.Media == nil {
			return Event{}, malformed(name, "media without its media object")
		}
		if f.Media.Track != "" && f.Media.Track != "inbound" {
			return Event{}, unknownEvent(name, "media of the %.40q track, not the caller's", f.Media.Track)
		}
		audio, err := decodeAudio(name, f.Media.Payload)
		if err != nil {
			return Event{}, err
		}
		return Event{Kind: Media, StreamID: f.StreamID, Seq: int64(f.Seq), Audio: audio}, nil
	case "dtmf":
		var f struct {
			plivoHead
			DTMF *struct {
				Digit jsonText `json:"digit"`
			} `json:"dtmf"`
			Digit jsonText `json:"digit"` // read too, where dtmf.digit is not
		}
		if err := decodeFrame(name, msg, &f); err != nil {
			return Event{}, err
		}
		if f.DTMF != nil && f.DTMF.Digit != "" {
			f.Digit = f.DTMF.Digit
		}
		if f.Digit == "" {
			return Event{}, malformed(name, "dtmf without a digit")
		}
		return Event{Kind: DTMF, StreamID: f.StreamID, Seq: int64(f.Seq), Digit: string(f.Digit)}, nil
	case "playedStream", "played":
		var f struct {
			plivoHead
			Name string `json:"name"`
		}
		if err := decodeFrame(name, msg, &f); err != nil {
			return Event{}, err
		}
		if f.Name == "" {
			return Event{}, malformed(name, "%s without a checkpoint name", event)
		}
		return Event{Kind: Mark, StreamID: f.StreamID, Seq: int64(f.Seq), Mark: f.Name}, nil
	case "clearedAudio", "stop":
		var f plivoHead
		if err := decodeFrame(name, msg, &f); err != nil {
			return Event{}, err
		}
		kind := Cleared
		if event == "stop" {
			kind = Stop
		}
		return Event{Kind: kind, StreamID: f.StreamID, Seq: int64(f.Seq)}, nil
	}
	return Event{}, unknownEvent(name, "event %.40q", event)
}

// plivoExtraHeaders parses a start's extra_headers: the answer's
// extraHeaders attribute, "name=value" pairs that Plivo's XML reference
// separates with commas and its stream reference's example with
// semicolons; both are read. A piece without "=" names nothing and is
// skipped. An object of names to values is read too.
func plivoExtraHeaders(raw json.RawMessage) (map[string]string, error) {
	out := make(map[string]string)
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return out, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("extra_headers: %v", err)
		}
		for _, piece := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' }) {
			k, v, ok := strings.Cut(piece, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				continue
			}
			out[k] = strings.TrimSpace(v)
		}
		return out, nil
	case '{':
		var m map[string]jsonText
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("extra_headers: %v", err)
		}
		return params(m), nil
	}
	return nil, fmt.Errorf("extra_headers is neither a string nor an object: %.40s", raw)
}

func (plivo) Media(streamID string, audio []byte) ([]byte, error) {
	if len(audio) == 0 {
		return nil, fmt.Errorf("carrier: plivo: no audio to send")
	}
	type media struct {
		ContentType string `json:"contentType"`
		SampleRate  int    `json:"sampleRate"`
		Payload     string `json:"payload"`
	}
	return json.Marshal(struct {
		Event    string `json:"event"`
		StreamID string `json:"streamId,omitempty"`
		Media    media  `json:"media"`
	}{"playAudio", streamID, media{"audio/x-mulaw", 8000, base64.StdEncoding.EncodeToString(audio)}})
}

func (plivo) Mark(streamID, name string) ([]byte, error) {
	if streamID == "" {
		return nil, fmt.Errorf("carrier: plivo: a checkpoint needs the stream id")
	}
	if name == "" {
		return nil, fmt.Errorf("carrier: plivo: a checkpoint needs a name")
	}
	return json.Marshal(struct {
		Event    string `json:"event"`
		StreamID string `json:"streamId"`
		Name     string `json:"name"`
	}{"checkpoint", streamID, name})
}

func (plivo) Clear(streamID string) ([]byte, error) {
	if streamID == "" {
		return nil, fmt.Errorf("carrier: plivo: clearAudio needs the stream id")
	}
	return json.Marshal(struct {
		Event    string `json:"event"`
		StreamID string `json:"streamId"`
	}{"clearAudio", streamID})
}

// plivoMaxExtraHeaders is the longest extraHeaders attribute Plivo takes.
const plivoMaxExtraHeaders = 512

// PlivoXML returns the XML that answers a call to a Plivo number whose
// application's answer URL is Holdline's: a bidirectional stream of mu-law
// at 8000 Hz (Plivo's default is 16-bit linear) of the caller's track to
// the WebSocket at streamURL (wss://…), which holds the call
// (keepCallAlive) until the stream ends, and then the call ends.
//
// params go in the extraHeaders attribute as name=value pairs, in the
// order of their names, and come back in the start's extra_headers. Plivo
// allows only letters and digits in them, and 512 bytes in all: PlivoXML
// returns an error rather than send what Plivo would refuse or mangle, so
// the stream token must be alphanumeric (hex, say) and the numbers given
// as Plivo's answer request gives them, digits with no "+". A parameter
// whose value is empty is left out.
func PlivoXML(streamURL string, params map[string]string) ([]byte, error) {
	var headers strings.Builder
	for _, k := range slices.Sorted(maps.Keys(params)) {
		v := params[k]
		if v == "" {
			continue
		}
		if !alnum(k) || !alnum(v) {
			return nil, fmt.Errorf("carrier: plivo extraHeaders: %q=%q: Plivo takes only letters and digits", k, v)
		}
		if headers.Len() > 0 {
			headers.WriteByte(',')
		}
		headers.WriteString(k + "=" + v)
	}
	if headers.Len() > plivoMaxExtraHeaders {
		return nil, fmt.Errorf("carrier: plivo extraHeaders: %d bytes, more than Plivo's %d", headers.Len(), plivoMaxExtraHeaders)
	}
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString(`<Response><Stream bidirectional="true" keepCallAlive="true" audioTrack="inbound" contentType="audio/x-mulaw;rate=8000"`)
	if headers.Len() > 0 {
		b.WriteString(` extraHeaders="`)
		b.WriteString(headers.String()) // letters, digits, '=' and ','
		b.WriteString(`"`)
	}
	b.WriteString(`>`)
	xmlAttr(&b, streamURL)
	b.WriteString("</Stream></Response>\n")
	return b.Bytes(), nil
}

// alnum reports whether s is non-empty and all ASCII letters and digits.
func alnum(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}
