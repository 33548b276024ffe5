package carrier_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/holdline/holdline/carrier"
)

// Frames in the shape of Plivo's stream event protocol reference.
var (
	plivoStart = `{
  "event": "start",
  "sequenceNumber": 1,
  "start": {
    "callId": "12345678-1234-1234-1234-123456789abc",
    "streamId": "87654321-4321-4321-4321-cba987654321",
    "accountId": "MAXXXXXXXXXXXXXXXXXX",
    "tracks": ["inbound"],
    "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000}
  },
  "extra_headers": "token=9f86d081884c7d65,from=14155550100,to=14155550199"
}`
	plivoMedia = `{
  "event": "media",
  "sequenceNumber": 42,
  "streamId": "87654321-4321-4321-4321-cba987654321",
  "media": {"track": "inbound", "timestamp": "1705312200000", "chunk": 41, "payload": "` +
		base64.StdEncoding.EncodeToString(telnyxAudio) + `"},
  "extra_headers": "token=9f86d081884c7d65,from=14155550100,to=14155550199"
}`
	plivoDTMF    = `{"event":"dtmf","sequenceNumber":43,"streamId":"87654321-4321-4321-4321-cba987654321","dtmf":{"track":"inbound","digit":"5","timestamp":"1705312200500"},"extra_headers":""}`
	plivoPlayed  = `{"event":"playedStream","sequenceNumber":44,"streamId":"87654321-4321-4321-4321-cba987654321","name":"phrase-3"}`
	plivoCleared = `{"sequenceNumber":45,"event":"clearedAudio","streamId":"87654321-4321-4321-4321-cba987654321"}`
)

func TestPlivoDecode(t *testing.T) {
	const stream = "87654321-4321-4321-4321-cba987654321"
	for _, tc := range []struct {
		name, msg string
		want      carrier.Event
	}{
		{"start", plivoStart, carrier.Event{
			Kind: carrier.Start, StreamID: stream, CallID: "12345678-1234-1234-1234-123456789abc", Seq: 1,
			Encoding: "audio/x-mulaw", Rate: 8000,
			Params: map[string]string{"token": "9f86d081884c7d65", "from": "14155550100", "to": "14155550199"},
		}},
		{"start with semicolons", `{"event":"start","sequenceNumber":1,"start":{"callId":"c","streamId":"s","mediaFormat":{"encoding":"audio/x-mulaw","sampleRate":8000}},"extra_headers":"userId=12345;sessionId=abc-xyz; ;novalue;=x"}`,
			carrier.Event{Kind: carrier.Start, StreamID: "s", CallID: "c", Seq: 1, Encoding: "audio/x-mulaw", Rate: 8000,
				Params: map[string]string{"userId": "12345", "sessionId": "abc-xyz"}}},
		{"start with headers inside, as an object", `{"event":"start","start":{"callId":"c","streamId":"s","extra_headers":{"token":"abc","n":5}}}`,
			carrier.Event{Kind: carrier.Start, StreamID: "s", CallID: "c", Params: map[string]string{"token": "abc", "n": "5"}}},
		{"start without headers", `{"event":"start","streamId":"s","start":{"callId":"c"}}`,
			carrier.Event{Kind: carrier.Start, StreamID: "s", CallID: "c", Params: map[string]string{}}},
		{"media", plivoMedia, carrier.Event{Kind: carrier.Media, StreamID: stream, Seq: 42, Audio: telnyxAudio}},
		{"dtmf", plivoDTMF, carrier.Event{Kind: carrier.DTMF, StreamID: stream, Seq: 43, Digit: "5"}},
		{"dtmf digit at the top", `{"event":"dtmf","streamId":"s","digit":"*"}`, carrier.Event{Kind: carrier.DTMF, StreamID: "s", Digit: "*"}},
		{"playedStream", plivoPlayed, carrier.Event{Kind: carrier.Mark, StreamID: stream, Seq: 44, Mark: "phrase-3"}},
		{"played", `{"event":"played","streamId":"s","name":"customer greeting audio"}`,
			carrier.Event{Kind: carrier.Mark, StreamID: "s", Mark: "customer greeting audio"}},
		{"clearedAudio", plivoCleared, carrier.Event{Kind: carrier.Cleared, StreamID: stream, Seq: 45}},
		{"stop", `{"event":"stop","streamId":"s"}`, carrier.Event{Kind: carrier.Stop, StreamID: "s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := carrier.Plivo.Decode([]byte(tc.msg))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Decode =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestPlivoDecodeError(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		want      error
		says      string
	}{
		{"empty", ``, carrier.ErrMalformed, "bad JSON"},
		{"binary", "\x00\x01\xff", carrier.ErrMalformed, "bad JSON"},
		{"truncated", plivoMedia[:70], carrier.ErrMalformed, "bad JSON"},
		{"string", `"media"`, carrier.ErrMalformed, "bad JSON"},
		{"no event", `{"streamId":"s"}`, carrier.ErrMalformed, "no event"},
		{"start without start", `{"event":"start","streamId":"s"}`, carrier.ErrMalformed, "start object"},
		{"start without streamId", `{"event":"start","start":{"callId":"c"}}`, carrier.ErrMalformed, "streamId"},
		{"start with headers a number", `{"event":"start","start":{"streamId":"s"},"extra_headers":12}`, carrier.ErrMalformed, "extra_headers"},
		{"start with headers an array", `{"event":"start","start":{"streamId":"s"},"extra_headers":["a=b"]}`, carrier.ErrMalformed, "extra_headers"},
		{"start with a nested header", `{"event":"start","start":{"streamId":"s"},"extra_headers":{"a":{"b":1}}}`, carrier.ErrMalformed, "extra_headers"},
		{"media without media", `{"event":"media"}`, carrier.ErrMalformed, "media object"},
		{"media without payload", `{"event":"media","media":{"track":"inbound","chunk":1}}`, carrier.ErrMalformed, "payload"},
		{"media bad base64", `{"event":"media","media":{"payload":"@@@@"}}`, carrier.ErrMalformed, "base64"},
		{"chunk not a number", `{"event":"media","sequenceNumber":"x1","media":{"payload":"/w=="}}`, carrier.ErrMalformed, "not an integer"},
		{"dtmf without digit", `{"event":"dtmf","dtmf":{"track":"inbound"}}`, carrier.ErrMalformed, "digit"},
		{"dtmf without dtmf", `{"event":"dtmf"}`, carrier.ErrMalformed, "digit"},
		{"playedStream without name", `{"event":"playedStream","streamId":"s"}`, carrier.ErrMalformed, "checkpoint name"},
		{"outbound track", `{"event":"media","media":{"track":"outbound","payload":"/w=="}}`, carrier.ErrUnknownEvent, "outbound"},
		{"unknown event", `{"event":"sendDTMF","dtmf":"42"}`, carrier.ErrUnknownEvent, "sendDTMF"},
		{"Twilio's mark", `{"event":"mark","mark":{"name":"a"}}`, carrier.ErrUnknownEvent, "mark"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := carrier.Plivo.Decode([]byte(tc.msg))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decode = %+v, %v; want an error wrapping %v", ev, err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "plivo") {
				t.Errorf("error %q does not say plivo and %q", err, tc.says)
			}
		})
	}
}

// TestPlivoEncode checks the frames sent as Plivo reads them: playAudio,
// checkpoint and clearAudio with the field names of Plivo's reference.
func TestPlivoEncode(t *testing.T) {
	const stream = "87654321-4321-4321-4321-cba987654321"
	media, err := carrier.Plivo.Media(stream, telnyxAudio)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, media, map[string]any{
		"event":    "playAudio",
		"streamId": stream,
		"media": map[string]any{
			"contentType": "audio/x-mulaw",
			"sampleRate":  float64(8000),
			"payload":     base64.StdEncoding.EncodeToString(telnyxAudio),
		},
	})
	mark, err := carrier.Plivo.Mark(stream, "phrase 3")
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, mark, map[string]any{"event": "checkpoint", "streamId": stream, "name": "phrase 3"})
	clear, err := carrier.Plivo.Clear(stream)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, clear, map[string]any{"event": "clearAudio", "streamId": stream})

	// Plivo's acknowledgements, answering what was sent, read back.
	played := strings.Replace(string(mark), `"checkpoint"`, `"playedStream"`, 1)
	if ev, err := carrier.Plivo.Decode([]byte(played)); err != nil || ev.Kind != carrier.Mark || ev.Mark != "phrase 3" || ev.StreamID != stream {
		t.Errorf("Decode(%s) = %+v, %v", played, ev, err)
	}
	cleared := strings.Replace(string(clear), `"clearAudio"`, `"clearedAudio"`, 1)
	if ev, err := carrier.Plivo.Decode([]byte(cleared)); err != nil || ev.Kind != carrier.Cleared {
		t.Errorf("Decode(%s) = %+v, %v", cleared, ev, err)
	}

	if _, err := carrier.Plivo.Media(stream, nil); err == nil {
		t.Error("Media(no audio) did not fail")
	}
	if _, err := carrier.Plivo.Mark(stream, ""); err == nil {
		t.Error("Mark(no name) did not fail")
	}
	if _, err := carrier.Plivo.Mark("", "a"); err == nil {
		t.Error("Mark(no stream) did not fail")
	}
	if _, err := carrier.Plivo.Clear(""); err == nil {
		t.Error("Clear(no stream) did not fail")
	}
	if carrier.Plivo.Name() != "plivo" {
		t.Errorf("Name = %q", carrier.Plivo.Name())
	}
}

// plivoXML is the part of Plivo's XML that PlivoXML writes, as Plivo
// parses it.
type plivoXML struct {
	XMLName xml.Name `xml:"Response"`
	Stream  []struct {
		Bidirectional string `xml:"bidirectional,attr"`
		KeepCallAlive string `xml:"keepCallAlive,attr"`
		AudioTrack    string `xml:"audioTrack,attr"`
		ContentType   string `xml:"contentType,attr"`
		ExtraHeaders  string `xml:"extraHeaders,attr"`
		URL           string `xml:",chardata"`
	}
	Verbs []xml.Name `xml:",any"`
}

func TestPlivoXML(t *testing.T) {
	url := "wss://agent.example.com/v1/plivo/stream?a=1&b=<2>"
	params := map[string]string{
		carrier.ParamToken: "9f86d081884c7d65",
		carrier.ParamFrom:  "14155550100",
		carrier.ParamTo:    "14155550199",
		"empty":            "",
	}
	out, err := carrier.PlivoXML(url, params)
	if err != nil {
		t.Fatal(err)
	}
	var doc plivoXML
	if err := xml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if len(doc.Stream) != 1 || len(doc.Verbs) != 0 {
		t.Fatalf("want one <Stream> and nothing else: %s", out)
	}
	s := doc.Stream[0]
	if s.URL != url || s.Bidirectional != "true" || s.KeepCallAlive != "true" || s.AudioTrack != "inbound" ||
		s.ContentType != "audio/x-mulaw;rate=8000" {
		t.Errorf("Stream = %+v", s)
	}
	if want := "from=14155550100,to=14155550199,token=9f86d081884c7d65"; s.ExtraHeaders != want {
		t.Errorf("extraHeaders = %q, want %q", s.ExtraHeaders, want)
	}

	// Plivo hands the extraHeaders back in the start: the transport finds
	// what the answer carried.
	start, _ := json.Marshal(map[string]any{
		"event": "start", "sequenceNumber": 1,
		"start":         map[string]any{"callId": "c", "streamId": "s", "mediaFormat": map[string]any{"encoding": "audio/x-mulaw", "sampleRate": 8000}},
		"extra_headers": s.ExtraHeaders,
	})
	ev, err := carrier.Plivo.Decode(start)
	if err != nil {
		t.Fatal(err)
	}
	delete(params, "empty")
	if !reflect.DeepEqual(ev.Params, params) {
		t.Errorf("Params = %q, want %q", ev.Params, params)
	}

	// No parameters: no extraHeaders.
	out, err = carrier.PlivoXML("wss://h/s", nil)
	if err != nil || bytes.Contains(out, []byte("extraHeaders")) {
		t.Errorf("PlivoXML(no params) = %s, %v", out, err)
	}
}

func TestPlivoXMLRefuses(t *testing.T) {
	for _, params := range []map[string]string{
		{"from": "+14155550100"},
		{"token": "a-b"},
		{"token": "a,b=c"},
		{"tok en": "a"},
		{"": "a"},
		{"token": "é"},
		{"token": strings.Repeat("a", 507)}, // 6 + 507 > 512
	} {
		if out, err := carrier.PlivoXML("wss://h/s", params); err == nil {
			t.Errorf("PlivoXML(%q) = %s, want an error", params, out)
		}
	}
	if _, err := carrier.PlivoXML("wss://h/s", map[string]string{"token": strings.Repeat("a", 506)}); err != nil {
		t.Errorf("PlivoXML(512 bytes) = %v", err)
	}
}
