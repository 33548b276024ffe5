package carrier

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"maps"
	"slices"
)

// Telnyx is the Codec for Telnyx's media streaming over a WebSocket, as a
// TeXML application's <Connect><Stream> opens it (TelnyxTeXML writes that
// answer).
//
// Telnyx sends connected, start, media, dtmf, mark, error and stop frames.
// The start names the stream at the top level (stream_id) and the call
// inside (start.call_control_id); it carries the caller and the callee
// itself (start.from, start.to), which fill Params' "from" and "to" when
// the answer's parameters did not, and start.client_state, when the call
// has one, as Params["client_state"]. An error frame is returned as a
// *StreamError.
//
// Media payloads are the RTP payloads without their headers: with the PCMU
// the answer asks for, mu-law. Telnyx transcodes only between PCMU and
// PCMA, and otherwise streams the call's own codec: the start's Encoding
// says which, and a stream that is not "PCMU" is not one the transport can
// play. A media frame of the outbound track (sent only if the stream asked
// for it) is not the caller: Decode returns ErrUnknownEvent for it, so that
// the agent never hears itself.
//
// In the bidirectional RTP mode the answer sets, Telnyx takes media, mark
// and clear frames back. It routes them by the socket, not by a stream id,
// so Media, Mark and Clear ignore streamID. A clear returns the pending
// marks; Telnyx has no cleared acknowledgement.
var Telnyx Codec = telnyx{}

type telnyx struct{}

func (telnyx) Name() string { return "telnyx" }

// telnyxHead is what every frame Telnyx sends has.
type telnyxHead struct {
	Seq      jsonInt `json:"sequence_number"`
	StreamID string  `json:"stream_id"`
}

// telnyxError is an error frame's detail: "payload" in Telnyx's frames,
// "error" read too.
type telnyxError struct {
	Code   jsonText `json:"code"`
	Title  jsonText `json:"title"`
	Detail jsonText `json:"detail"`
}

func (telnyx) Decode(msg []byte) (Event, error) {
	const name = "telnyx"
	event, err := eventOf(name, msg)
	if err != nil {
		return Event{}, err
	}
	var head telnyxHead
	switch event {
	case "connected":
		if err := decodeFrame(name, msg, &head); err != nil {
			return Event{}, err
		}
		return Event{Kind: Connected, StreamID: head.StreamID, Seq: int64(head.Seq)}, nil
	case "start":
		var f struct {
			telnyxHead
			Start *struct {
				CallControlID    string              `json:"call_control_id"`
				From             string              `json:"from"`
				To               string              `json:"to"`
				ClientState      string              `json:"client_state"`
				CustomParameters map[string]jsonText `json:"custom_parameters"`
				MediaFormat      struct {
					Encoding   string  `json:"encoding"`
					SampleRate jsonInt `json:"sample_rate"`
				} `json:"media_format"`
			} `json:"start"`
		}
		if err := decodeFrame(name, msg, &f); err != nil {
			return Event{}, err
		}
		if f.StreamID == "" {
			return Event{}, malformed(name, "start without a stream_id")
		}
		if f.Start == nil {
			return Event{}, malformed(name, "start without its start object")
		}
		ev := Event{
			Kind: Start, StreamID: f.StreamID, Seq: int64(f.Seq),
			CallID:   f.Start.CallControlID,
			Encoding: f.Start.MediaFormat.Encoding,
			Rate:     int(f.Start.MediaFormat.SampleRate),
			Params:   params(f.Start.CustomParameters),
		}
		fill(ev.Params, ParamFrom, f.Start.From)
		fill(ev.Params, ParamTo, f.Start.To)
		fill(ev.Params, "client_state", f.Start.ClientState)
		return ev, nil
	case "media":
		var f struct {
			telnyxHead
			Media *struct {
				Track     string  `json:"track"`
				Timestamp jsonInt `json:"timestamp"`
				Payload   string  `json:"payload"`
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
		return Event{Kind: Media, StreamID: f.StreamID, Seq: int64(f.Seq), Timestamp: int64(f.Media.Timestamp), Audio: audio}, nil
	case "dtmf":
		var f struct {
			telnyxHead
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
	case "mark":
		var f struct {
			telnyxHead
			Mark *struct {
				Name string `json:"name"`
			} `json:"mark"`
		}
		if err := decodeFrame(name, msg, &f); err != nil {
			return Event{}, err
		}
		if f.Mark == nil || f.Mark.Name == "" {
			return Event{}, malformed(name, "mark without a name")
		}
		return Event{Kind: Mark, StreamID: f.StreamID, Seq: int64(f.Seq), Mark: f.Mark.Name}, nil
	case "stop":
		var f struct {
			telnyxHead
			Stop *struct {
				CallControlID string `json:"call_control_id"`
			} `json:"stop"`
		}
		if err := decodeFrame(name, msg, &f); err != nil {
			return Event{}, err
		}
		ev := Event{Kind: Stop, StreamID: f.StreamID, Seq: int64(f.Seq)}
		if f.Stop != nil {
			ev.CallID = f.Stop.CallControlID
		}
		return ev, nil
	case "error":
		var f struct {
			telnyxHead
			Payload *telnyxError `json:"payload"`
			Error   *telnyxError `json:"error"`
		}
		if err := decodeFrame(name, msg, &f); err != nil {
			return Event{}, err
		}
		e := f.Payload
		if e == nil {
			e = f.Error
		}
		se := &StreamError{Carrier: name, StreamID: f.StreamID}
		if e != nil {
			se.Code, se.Title, se.Detail = string(e.Code), string(e.Title), string(e.Detail)
		}
		return Event{}, se
	}
	return Event{}, unknownEvent(name, "event %.40q", event)
}

// fill sets m[k] = v where v says something and m has nothing for k.
func fill(m map[string]string, k, v string) {
	if v != "" && m[k] == "" {
		m[k] = v
	}
}

// telnyxMaxChunk is the most audio one media frame may carry: Telnyx plays
// chunks of 20 ms to 30 s (of mu-law at 8 kHz, 160 to 240000 bytes).
const telnyxMaxChunk = 30 * 8000

func (telnyx) Media(streamID string, audio []byte) ([]byte, error) {
	if len(audio) == 0 {
		return nil, fmt.Errorf("carrier: telnyx: no audio to send")
	}
	if len(audio) > telnyxMaxChunk {
		return nil, fmt.Errorf("carrier: telnyx: %d bytes of audio in one frame, more than Telnyx's 30 s", len(audio))
	}
	var f struct {
		Event string `json:"event"`
		Media struct {
			Payload string `json:"payload"`
		} `json:"media"`
	}
	f.Event = "media"
	f.Media.Payload = base64.StdEncoding.EncodeToString(audio)
	return json.Marshal(f)
}

func (telnyx) Mark(streamID, name string) ([]byte, error) {
	if name == "" {
		return nil, fmt.Errorf("carrier: telnyx: a mark needs a name")
	}
	var f struct {
		Event string `json:"event"`
		Mark  struct {
			Name string `json:"name"`
		} `json:"mark"`
	}
	f.Event = "mark"
	f.Mark.Name = name
	return json.Marshal(f)
}

func (telnyx) Clear(streamID string) ([]byte, error) {
	return []byte(`{"event":"clear"}`), nil
}

// TelnyxTeXML returns the TeXML that answers a call to a Telnyx number
// whose TeXML application's voice URL is Holdline's: it connects the call
// to the WebSocket at streamURL (wss://…) and hangs up when that stream
// ends.
//
// The stream is bidirectional with RTP payloads (bidirectionalMode="rtp";
// Telnyx's default, mp3, plays whole files at one a second and cannot
// carry a conversation), PCMU at 8000 Hz both ways, and only the caller's
// track, so that the agent does not hear itself. Each of params becomes a
// <Parameter> that Telnyx hands back in the start frame's
// custom_parameters, in the order of their names: the token, and the
// caller and callee (ParamToken, ParamFrom, ParamTo).
func TelnyxTeXML(streamURL string, params map[string]string) []byte {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString(`<Response><Connect><Stream url="`)
	xmlAttr(&b, streamURL)
	b.WriteString(`" track="inbound_track" codec="PCMU" bidirectionalMode="rtp" bidirectionalCodec="PCMU" bidirectionalSamplingRate="8000">`)
	for _, k := range slices.Sorted(maps.Keys(params)) {
		b.WriteString(`<Parameter name="`)
		xmlAttr(&b, k)
		b.WriteString(`" value="`)
		xmlAttr(&b, params[k])
		b.WriteString(`"/>`)
	}
	b.WriteString("</Stream></Connect></Response>\n")
	return b.Bytes()
}

// xmlAttr writes s escaped for an attribute value between double quotes.
func xmlAttr(b *bytes.Buffer, s string) {
	xml.EscapeText(b, []byte(s)) // a bytes.Buffer does not fail
}
