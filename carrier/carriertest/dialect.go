package carriertest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/holdline/holdline/carrier"
)

// dialect is what one carrier does differently: its webhook, its answer
// and its frames. Each is written from the carrier's own documentation,
// not from Holdline's codecs, so that the phone checks them.
type dialect interface {
	callID() string
	streamID() string
	voicePath() string
	// form is the voice webhook's form; sign signs the request.
	form(cfg Config) url.Values
	sign(req *http.Request, cfg Config, u string, form url.Values, body string)
	// answer reads the webhook's answer: the stream's URL and parameters.
	// An answer the carrier would not stream as a conversation is an
	// error.
	answer(body string) (string, map[string]string, error)
	// connected is the first frame (nil: none).
	connected() map[string]any
	start(cfg Config, stream, call string, params map[string]string) map[string]any
	// stamp puts the sequence number and the stream id on a frame.
	stamp(msg map[string]any, seq int64, stream string)
	appendMedia(b []byte, seq int64, stream string, chunk, ts int64, payload []byte) []byte
	dtmf(digit string) map[string]any
	// stop ends the stream (nil: the carrier closes the socket).
	stop(call string) map[string]any
	// decode reads a frame from Holdline, or says why the carrier would
	// refuse it.
	decode(b []byte, stream string) (inFrame, string)
	// played answers a mark played; cleared answers a clear that voided
	// the marks named.
	played(name string) map[string]any
	cleared(voided []string) []map[string]any
}

type inKind int

const (
	inMedia inKind = iota + 1
	inMark
	inClear
)

type inFrame struct {
	kind  inKind
	audio []byte
	name  string
}

func newID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// outFrame is every frame Holdline may send, under any carrier's names.
type outFrame struct {
	Event     string          `json:"event"`
	StreamSid *string         `json:"streamSid"`
	StreamID  *string         `json:"streamId"`
	SnakeID   *string         `json:"stream_id"`
	Name      string          `json:"name"`
	Media     json.RawMessage `json:"media"`
	Mark      *struct {
		Name string `json:"name"`
	} `json:"mark"`
}

type outMedia struct {
	Payload     string `json:"payload"`
	ContentType string `json:"contentType"`
	SampleRate  int    `json:"sampleRate"`
}

func decodeOut(b []byte) (outFrame, outMedia, string) {
	var f outFrame
	if err := json.Unmarshal(b, &f); err != nil {
		return f, outMedia{}, "not JSON: " + err.Error()
	}
	var m outMedia
	if len(f.Media) > 0 {
		if err := json.Unmarshal(f.Media, &m); err != nil {
			return f, m, "media is not an object: " + err.Error()
		}
	}
	return f, m, ""
}

func payload(m outMedia) ([]byte, string) {
	audio, err := base64.StdEncoding.DecodeString(m.Payload)
	if err != nil || len(audio) == 0 {
		return nil, "media payload is not base64 audio"
	}
	return audio, ""
}

// Twilio, as its Media Streams reference has it.
type twilioDialect struct{}

func (twilioDialect) callID() string    { return newID("CA", 16) }
func (twilioDialect) streamID() string  { return newID("MZ", 16) }
func (twilioDialect) voicePath() string { return carrier.TwilioVoicePath }

func (twilioDialect) form(cfg Config) url.Values {
	return url.Values{"CallSid": {cfg.CallSid}, "AccountSid": {"ACtest"}, "From": {orDefault(cfg.From, "+15550100")},
		"To": {orDefault(cfg.To, "+15550199")}, "CallStatus": {orDefault(cfg.CallStatus, "ringing")}, "Direction": {"inbound"}}
}

func (twilioDialect) sign(req *http.Request, cfg Config, u string, form url.Values, _ string) {
	if cfg.AuthToken == "" {
		return
	}
	key := cfg.AuthToken
	if cfg.BadSignature {
		key += "x"
	}
	req.Header.Set("X-Twilio-Signature", carrier.TwilioSignature(key, u, form))
}

func (twilioDialect) answer(body string) (string, map[string]string, error) {
	var doc TwiML
	if err := xml.Unmarshal([]byte(body), &doc); err != nil {
		return "", nil, err
	}
	params := map[string]string{}
	for _, p := range doc.Connect.Stream.Params {
		params[p.Name] = p.Value
	}
	return doc.Connect.Stream.URL, params, nil
}

func (twilioDialect) connected() map[string]any {
	return map[string]any{"event": "connected", "protocol": "Call", "version": "1.0.0"}
}

func (twilioDialect) start(_ Config, stream, call string, params map[string]string) map[string]any {
	return map[string]any{"event": "start", "start": map[string]any{
		"accountSid": "ACtest", "streamSid": stream, "callSid": call,
		"tracks":           []string{"inbound"},
		"customParameters": params,
		"mediaFormat":      map[string]any{"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
	}}
}

func (twilioDialect) stamp(msg map[string]any, seq int64, stream string) {
	msg["sequenceNumber"] = strconv.FormatInt(seq, 10)
	if _, ok := msg["streamSid"]; !ok {
		msg["streamSid"] = stream
	}
}

func (twilioDialect) appendMedia(b []byte, seq int64, stream string, chunk, ts int64, audio []byte) []byte {
	b = append(b, `{"event":"media","sequenceNumber":"`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `","streamSid":"`...)
	b = append(b, stream...)
	b = append(b, `","media":{"track":"inbound","chunk":"`...)
	b = strconv.AppendInt(b, chunk, 10)
	b = append(b, `","timestamp":"`...)
	b = strconv.AppendInt(b, ts, 10)
	b = append(b, `","payload":"`...)
	b = base64.StdEncoding.AppendEncode(b, audio)
	return append(b, `"}}`...)
}

func (twilioDialect) dtmf(digit string) map[string]any {
	return map[string]any{"event": "dtmf", "dtmf": map[string]any{"track": "inbound_track", "digit": digit}}
}

func (twilioDialect) stop(call string) map[string]any {
	return map[string]any{"event": "stop", "stop": map[string]any{"accountSid": "ACtest", "callSid": call}}
}

func (twilioDialect) decode(b []byte, stream string) (inFrame, string) {
	f, m, why := decodeOut(b)
	if why != "" {
		return inFrame{}, why
	}
	if f.StreamSid == nil || *f.StreamSid != stream {
		return inFrame{}, "no streamSid of this stream"
	}
	switch f.Event {
	case "media":
		audio, why := payload(m)
		return inFrame{kind: inMedia, audio: audio}, why
	case "mark":
		if f.Mark == nil || f.Mark.Name == "" {
			return inFrame{}, "mark without a name"
		}
		return inFrame{kind: inMark, name: f.Mark.Name}, ""
	case "clear":
		return inFrame{kind: inClear}, ""
	}
	return inFrame{}, "not a Twilio event"
}

func (twilioDialect) played(name string) map[string]any {
	return map[string]any{"event": "mark", "mark": map[string]any{"name": name}}
}

func (d twilioDialect) cleared(voided []string) []map[string]any {
	var out []map[string]any
	for _, n := range voided {
		out = append(out, d.played(n))
	}
	return out
}

// Telnyx, as its TeXML <Stream> and media streaming references have it.
type telnyxDialect struct{}

func (telnyxDialect) callID() string    { return newID("v3:", 20) }
func (telnyxDialect) streamID() string  { return newID("", 16) }
func (telnyxDialect) voicePath() string { return carrier.TelnyxVoicePath }

func (telnyxDialect) form(cfg Config) url.Values {
	return url.Values{"CallSid": {cfg.CallSid}, "CallSidLegacy": {cfg.CallSid}, "AccountSid": {"f5586561-8ff0-4291-a51b-c7dfe4139ff9"},
		"From": {orDefault(cfg.From, "+13122010094")}, "To": {orDefault(cfg.To, "+13122123456")},
		"CallStatus": {orDefault(cfg.CallStatus, "ringing")}, "Direction": {"inbound"}, "ConnectionId": {"1684641123236054244"}}
}

func (telnyxDialect) sign(req *http.Request, cfg Config, _ string, _ url.Values, body string) {
	if cfg.TelnyxKey == nil {
		return
	}
	at := cfg.SignedAt
	if at.IsZero() {
		at = time.Now()
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	signed := ts + "|" + body
	if cfg.BadSignature {
		signed += " "
	}
	req.Header.Set("telnyx-timestamp", ts)
	req.Header.Set("telnyx-signature-ed25519", base64.StdEncoding.EncodeToString(ed25519.Sign(cfg.TelnyxKey, []byte(signed))))
}

func (telnyxDialect) answer(body string) (string, map[string]string, error) {
	url, params, err := twilioDialect{}.answer(body)
	if err != nil {
		return "", nil, err
	}
	var doc TwiML
	_ = xml.Unmarshal([]byte(body), &doc)
	// Telnyx's default bidirectional mode plays whole MP3 files: only
	// rtp carries a conversation, and the stream must be PCMU to be
	// played by what Holdline sends.
	if s := doc.Connect.Stream; s.BidirectionalMode != "rtp" || s.Codec != "PCMU" {
		return "", nil, fmt.Errorf("the <Stream> is bidirectionalMode %q codec %q, not rtp PCMU", s.BidirectionalMode, s.Codec)
	}
	return url, params, nil
}

func (telnyxDialect) connected() map[string]any {
	return map[string]any{"event": "connected", "version": "1.0.0"}
}

func (telnyxDialect) start(cfg Config, stream, call string, params map[string]string) map[string]any {
	return map[string]any{"event": "start", "start": map[string]any{
		"user_id": "3e6f995f-85f7-4705-9741-53b116d28237", "call_control_id": call,
		"call_session_id": "ff55a038-6f5d-11ef-9692-02420aeffb1f",
		"from":            orDefault(cfg.From, "+13122010094"), "to": orDefault(cfg.To, "+13122123456"),
		"custom_parameters": params,
		"media_format":      map[string]any{"encoding": "PCMU", "sample_rate": 8000, "channels": 1},
	}}
}

func (telnyxDialect) stamp(msg map[string]any, seq int64, stream string) {
	msg["sequence_number"] = strconv.FormatInt(seq, 10)
	if _, ok := msg["stream_id"]; !ok {
		msg["stream_id"] = stream
	}
}

func (telnyxDialect) appendMedia(b []byte, seq int64, stream string, chunk, ts int64, audio []byte) []byte {
	b = append(b, `{"event":"media","sequence_number":"`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `","media":{"track":"inbound","chunk":"`...)
	b = strconv.AppendInt(b, chunk, 10)
	b = append(b, `","timestamp":"`...)
	b = strconv.AppendInt(b, ts, 10)
	b = append(b, `","payload":"`...)
	b = base64.StdEncoding.AppendEncode(b, audio)
	b = append(b, `"},"stream_id":"`...)
	b = append(b, stream...)
	return append(b, `"}`...)
}

func (telnyxDialect) dtmf(digit string) map[string]any {
	return map[string]any{"event": "dtmf", "occurred_at": time.Now().UTC().Format(time.RFC3339Nano), "dtmf": map[string]any{"digit": digit}}
}

func (telnyxDialect) stop(call string) map[string]any {
	return map[string]any{"event": "stop", "stop": map[string]any{"user_id": "3e6f995f-85f7-4705-9741-53b116d28237", "call_control_id": call}}
}

// decode reads what a Telnyx stream takes back in rtp mode: media, mark
// and clear, which name no stream (Telnyx knows it by its socket).
func (telnyxDialect) decode(b []byte, _ string) (inFrame, string) {
	f, m, why := decodeOut(b)
	if why != "" {
		return inFrame{}, why
	}
	if f.StreamSid != nil || f.StreamID != nil {
		return inFrame{}, "a stream id under another carrier's name"
	}
	switch f.Event {
	case "media":
		audio, why := payload(m)
		if why == "" && (len(audio) < 160 || len(audio) > 30*8000) {
			why = fmt.Sprintf("a chunk of %d bytes: Telnyx plays 20 ms to 30 s", len(audio))
		}
		return inFrame{kind: inMedia, audio: audio}, why
	case "mark":
		if f.Mark == nil || f.Mark.Name == "" {
			return inFrame{}, "mark without a name"
		}
		return inFrame{kind: inMark, name: f.Mark.Name}, ""
	case "clear":
		return inFrame{kind: inClear}, ""
	}
	return inFrame{}, "not a Telnyx event"
}

func (telnyxDialect) played(name string) map[string]any {
	return map[string]any{"event": "mark", "mark": map[string]any{"name": name}}
}

// cleared: Telnyx returns the pending marks on a clear.
func (d telnyxDialect) cleared(voided []string) []map[string]any {
	var out []map[string]any
	for _, n := range voided {
		out = append(out, d.played(n))
	}
	return out
}

// Plivo, as its <Stream> XML and audio streaming references have it.
type plivoDialect struct{}

func (plivoDialect) callID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
func (d plivoDialect) streamID() string { return d.callID() }
func (plivoDialect) voicePath() string  { return carrier.PlivoVoicePath }

// form is the answer URL's request; Plivo gives numbers as digits, no "+".
func (plivoDialect) form(cfg Config) url.Values {
	f := url.Values{"CallUUID": {cfg.CallSid}, "From": {orDefault(cfg.From, "14155550100")}, "To": {orDefault(cfg.To, "14155550199")},
		"CallStatus": {orDefault(cfg.CallStatus, "ringing")}, "Direction": {"inbound"}, "Event": {"StartApp"}}
	if cfg.CallStatus == "completed" {
		f.Set("Event", "Hangup")
		f.Set("HangupCause", "NORMAL_CLEARING")
		f.Set("Duration", "12")
	}
	return f
}

func (plivoDialect) sign(req *http.Request, cfg Config, u string, form url.Values, _ string) {
	if cfg.AuthToken == "" {
		return
	}
	key := cfg.AuthToken
	if cfg.BadSignature {
		key += "x"
	}
	nonce := strconv.FormatInt(time.Now().UnixNano(), 10)
	req.Header.Set("X-Plivo-Signature-V3-Nonce", nonce)
	req.Header.Set("X-Plivo-Signature-V3", carrier.PlivoSignatureV3(key, http.MethodPost, u, form, nonce))
}

func (plivoDialect) answer(body string) (string, map[string]string, error) {
	var doc struct {
		Stream struct {
			URL           string `xml:",chardata"`
			Bidirectional string `xml:"bidirectional,attr"`
			AudioTrack    string `xml:"audioTrack,attr"`
			ContentType   string `xml:"contentType,attr"`
			ExtraHeaders  string `xml:"extraHeaders,attr"`
		} `xml:"Stream"`
	}
	if err := xml.Unmarshal([]byte(body), &doc); err != nil {
		return "", nil, err
	}
	s := doc.Stream
	if s.Bidirectional != "true" || s.ContentType != "audio/x-mulaw;rate=8000" || s.AudioTrack != "inbound" {
		return "", nil, fmt.Errorf("the <Stream> is bidirectional %q, %q, track %q: not a mu-law conversation", s.Bidirectional, s.ContentType, s.AudioTrack)
	}
	params := map[string]string{}
	for _, kv := range strings.Split(s.ExtraHeaders, ",") {
		k, v, _ := strings.Cut(kv, "=")
		if !alnum(k) || !alnum(v) {
			return "", nil, fmt.Errorf("extraHeaders %q: Plivo takes letters and digits only", s.ExtraHeaders)
		}
		params[k] = v
	}
	return strings.TrimSpace(s.URL), params, nil
}

func alnum(s string) bool {
	return s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") == ""
}

// connected: Plivo sends none.
func (plivoDialect) connected() map[string]any { return nil }

// start carries the answer's extraHeaders back as a string, in Plivo's
// top-level extra_headers.
func (plivoDialect) start(_ Config, stream, call string, params map[string]string) map[string]any {
	var h []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		h = append(h, k+"="+params[k])
	}
	return map[string]any{"event": "start", "start": map[string]any{
		"callId": call, "streamId": stream, "accountId": "MA00000000000000000000",
		"tracks":      []string{"inbound"},
		"mediaFormat": map[string]any{"encoding": "audio/x-mulaw", "sampleRate": 8000},
	}, "extra_headers": strings.Join(h, ",")}
}

func (plivoDialect) stamp(msg map[string]any, seq int64, stream string) {
	msg["sequenceNumber"] = seq
	if _, ok := msg["streamId"]; !ok {
		msg["streamId"] = stream
	}
}

// appendMedia: Plivo's media timestamps are wall-clock milliseconds.
func (plivoDialect) appendMedia(b []byte, seq int64, stream string, chunk, _ int64, audio []byte) []byte {
	b = append(b, `{"event":"media","sequenceNumber":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"streamId":"`...)
	b = append(b, stream...)
	b = append(b, `","media":{"track":"inbound","timestamp":"`...)
	b = strconv.AppendInt(b, time.Now().UnixMilli(), 10)
	b = append(b, `","chunk":`...)
	b = strconv.AppendInt(b, chunk, 10)
	b = append(b, `,"payload":"`...)
	b = base64.StdEncoding.AppendEncode(b, audio)
	return append(b, `"}}`...)
}

func (plivoDialect) dtmf(digit string) map[string]any {
	return map[string]any{"event": "dtmf", "dtmf": map[string]any{"digit": digit}}
}

// stop: Plivo ends a stream by closing its socket.
func (plivoDialect) stop(string) map[string]any { return nil }

// decode reads what a bidirectional Plivo stream takes: playAudio,
// checkpoint and clearAudio, each naming the stream.
func (plivoDialect) decode(b []byte, stream string) (inFrame, string) {
	f, m, why := decodeOut(b)
	if why != "" {
		return inFrame{}, why
	}
	if f.StreamID == nil || *f.StreamID != stream {
		return inFrame{}, "no streamId of this stream"
	}
	switch f.Event {
	case "playAudio":
		if m.ContentType != "audio/x-mulaw" || m.SampleRate != 8000 {
			return inFrame{}, fmt.Sprintf("playAudio of %q at %d, not the stream's mu-law at 8000", m.ContentType, m.SampleRate)
		}
		audio, why := payload(m)
		return inFrame{kind: inMedia, audio: audio}, why
	case "checkpoint":
		if f.Name == "" {
			return inFrame{}, "checkpoint without a name"
		}
		return inFrame{kind: inMark, name: f.Name}, ""
	case "clearAudio":
		return inFrame{kind: inClear}, ""
	}
	return inFrame{}, "not a Plivo event"
}

func (plivoDialect) played(name string) map[string]any {
	return map[string]any{"event": "playedStream", "name": name}
}

// cleared: Plivo drops the pending checkpoints unanswered and says so.
func (plivoDialect) cleared([]string) []map[string]any {
	return []map[string]any{{"event": "clearedAudio"}}
}
