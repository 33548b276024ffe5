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

// telnyxAudio is 20 ms of mu-law, the size of a frame Telnyx sends.
var telnyxAudio = bytes.Repeat([]byte{0xff, 0x7f, 0x00, 0x80}, 40)

// Frames in the shape of Telnyx's media streaming reference.
var (
	telnyxConnected = `{"event":"connected","version":"1.0.0"}`
	telnyxStart     = `{
  "event": "start",
  "sequence_number": "1",
  "stream_id": "32DE0DEA-53CB-4B21-89A4-9E1819C043BC",
  "start": {
    "user_id": "3E6F995F-85F7-4705-9741-53B116D28237",
    "call_control_id": "v3:T02llQxIyaRkhfRKxgAP8nY511EhFLizdvdUKJiSw8d6A9BborherQ",
    "call_session_id": "ff55a038-6f5d-11ef-9692-02420aeffb1f",
    "from": "+13122010094",
    "to": "+13122123456",
    "tags": ["TAG1", "TAG2"],
    "client_state": "aGF2ZSBhIG5pY2UgZGF5ID1d",
    "custom_parameters": {"token": "c2f1d0e9a8b7", "to": "+13125550000", "attempt": 2},
    "media_format": {"encoding": "PCMU", "sample_rate": 8000, "channels": 1}
  }
}`
	telnyxMedia = `{"event":"media","sequence_number":"4","media":{"track":"inbound","chunk":"2","timestamp":"20","payload":"` +
		base64.StdEncoding.EncodeToString(telnyxAudio) + `"},"stream_id":"32DE0DEA-53CB-4B21-89A4-9E1819C043BC"}`
	telnyxDTMF = `{"event":"dtmf","stream_id":"32DE0DEA-53CB-4B21-89A4-9E1819C043BC","occurred_at":"2026-11-26T10:00:01.000Z","sequence_number":"5","dtmf":{"digit":"#"}}`
	telnyxMark = `{"event":"mark","sequence_number":"6","stream_id":"32DE0DEA-53CB-4B21-89A4-9E1819C043BC","mark":{"name":"phrase-3"}}`
	telnyxStop = `{"event":"stop","sequence_number":"7","stop":{"user_id":"3E6F995F-85F7-4705-9741-53B116D28237","call_control_id":"v3:T02llQxIyaRkhfRKxgAP8nY511EhFLizdvdUKJiSw8d6A9BborherQ"},"stream_id":"32DE0DEA-53CB-4B21-89A4-9E1819C043BC"}`
	telnyxErr  = `{"event":"error","sequence_number":"8","stream_id":"32DE0DEA-53CB-4B21-89A4-9E1819C043BC","payload":{"code":100002,"title":"Unknown error","detail":"An unknown error occurred while processing the frame"}}`
)

func TestTelnyxDecode(t *testing.T) {
	const stream = "32DE0DEA-53CB-4B21-89A4-9E1819C043BC"
	const call = "v3:T02llQxIyaRkhfRKxgAP8nY511EhFLizdvdUKJiSw8d6A9BborherQ"
	for _, tc := range []struct {
		name, msg string
		want      carrier.Event
	}{
		{"connected", telnyxConnected, carrier.Event{Kind: carrier.Connected}},
		{"start", telnyxStart, carrier.Event{
			Kind: carrier.Start, StreamID: stream, CallID: call, Seq: 1,
			Encoding: "PCMU", Rate: 8000,
			// The answer's "to" wins over the start's; "from" is filled
			// from the start; a number parameter keeps its text.
			Params: map[string]string{
				"token": "c2f1d0e9a8b7", "to": "+13125550000", "from": "+13122010094",
				"attempt": "2", "client_state": "aGF2ZSBhIG5pY2UgZGF5ID1d",
			},
		}},
		{"media", telnyxMedia, carrier.Event{Kind: carrier.Media, StreamID: stream, Seq: 4, Timestamp: 20, Audio: telnyxAudio}},
		{"media without track or stream", `{"event":"media","media":{"payload":"/38AgA=="}}`,
			carrier.Event{Kind: carrier.Media, Audio: []byte{0xff, 0x7f, 0x00, 0x80}}},
		{"media unpadded", `{"event":"media","media":{"payload":"/38AgP8"}}`,
			carrier.Event{Kind: carrier.Media, Audio: []byte{0xff, 0x7f, 0x00, 0x80, 0xff}}},
		{"numbers as numbers", `{"event":"media","sequence_number":9,"media":{"timestamp":180,"payload":"/w=="}}`,
			carrier.Event{Kind: carrier.Media, Seq: 9, Timestamp: 180, Audio: []byte{0xff}}},
		{"dtmf", telnyxDTMF, carrier.Event{Kind: carrier.DTMF, StreamID: stream, Seq: 5, Digit: "#"}},
		{"dtmf digit as a number", `{"event":"dtmf","dtmf":{"digit":7}}`, carrier.Event{Kind: carrier.DTMF, Digit: "7"}},
		{"mark", telnyxMark, carrier.Event{Kind: carrier.Mark, StreamID: stream, Seq: 6, Mark: "phrase-3"}},
		{"stop", telnyxStop, carrier.Event{Kind: carrier.Stop, StreamID: stream, CallID: call, Seq: 7}},
		{"stop bare", `{"event":"stop"}`, carrier.Event{Kind: carrier.Stop}},
		{"unknown fields", `{"event":"connected","version":"2.0.0","protocol":"Call","extra":{"a":[1,2]}}`,
			carrier.Event{Kind: carrier.Connected}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := carrier.Telnyx.Decode([]byte(tc.msg))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Decode =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestTelnyxDecodeError(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		want      error
		says      string
	}{
		{"empty", ``, carrier.ErrMalformed, "bad JSON"},
		{"not JSON", `event=media`, carrier.ErrMalformed, "bad JSON"},
		{"truncated", telnyxMedia[:60], carrier.ErrMalformed, "bad JSON"},
		{"array", `[{"event":"media"}]`, carrier.ErrMalformed, "bad JSON"},
		{"null", `null`, carrier.ErrMalformed, "no event"},
		{"no event", `{"stream_id":"x"}`, carrier.ErrMalformed, "no event"},
		{"event not a string", `{"event":3}`, carrier.ErrMalformed, "bad JSON"},
		{"start without stream_id", `{"event":"start","start":{"call_control_id":"v3:x"}}`, carrier.ErrMalformed, "stream_id"},
		{"start without start", `{"event":"start","stream_id":"s"}`, carrier.ErrMalformed, "start object"},
		{"start with a nested parameter", `{"event":"start","stream_id":"s","start":{"custom_parameters":{"a":{"b":1}}}}`, carrier.ErrMalformed, "bad JSON"},
		{"media without media", `{"event":"media","stream_id":"s"}`, carrier.ErrMalformed, "media object"},
		{"media without payload", `{"event":"media","media":{"track":"inbound","chunk":"1"}}`, carrier.ErrMalformed, "payload"},
		{"media bad base64", `{"event":"media","media":{"payload":"not*base64!"}}`, carrier.ErrMalformed, "base64"},
		{"media payload not a string", `{"event":"media","media":{"payload":12}}`, carrier.ErrMalformed, "bad JSON"},
		{"sequence not a number", `{"event":"mark","sequence_number":"six","mark":{"name":"a"}}`, carrier.ErrMalformed, "not an integer"},
		{"dtmf without digit", `{"event":"dtmf","dtmf":{}}`, carrier.ErrMalformed, "digit"},
		{"mark without name", `{"event":"mark","mark":{"name":""}}`, carrier.ErrMalformed, "name"},
		{"outbound track", `{"event":"media","media":{"track":"outbound","payload":"/w=="}}`, carrier.ErrUnknownEvent, "outbound"},
		{"unknown event", `{"event":"transcription","text":"hello"}`, carrier.ErrUnknownEvent, "transcription"},
		{"a clear echoed", `{"event":"clear"}`, carrier.ErrUnknownEvent, "clear"},
		{"unknown event, odd fields", `{"event":"transcription","media":"text","sequence_number":{}}`, carrier.ErrUnknownEvent, "transcription"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := carrier.Telnyx.Decode([]byte(tc.msg))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decode = %+v, %v; want an error wrapping %v", ev, err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "telnyx") {
				t.Errorf("error %q does not say telnyx and %q", err, tc.says)
			}
		})
	}
}

func TestTelnyxDecodeStreamError(t *testing.T) {
	_, err := carrier.Telnyx.Decode([]byte(telnyxErr))
	var se *carrier.StreamError
	if !errors.As(err, &se) {
		t.Fatalf("Decode(error) = %v, want a *StreamError", err)
	}
	want := carrier.StreamError{Carrier: "telnyx", StreamID: "32DE0DEA-53CB-4B21-89A4-9E1819C043BC",
		Code: "100002", Title: "Unknown error", Detail: "An unknown error occurred while processing the frame"}
	if *se != want {
		t.Errorf("StreamError = %+v, want %+v", *se, want)
	}
	if errors.Is(err, carrier.ErrMalformed) || errors.Is(err, carrier.ErrUnknownEvent) {
		t.Errorf("a carrier's error is neither malformed nor unknown: %v", err)
	}
	if !strings.Contains(err.Error(), "100002") {
		t.Errorf("error %q does not give the code", err)
	}
	// A bare error frame is still the carrier's error.
	if _, err := carrier.Telnyx.Decode([]byte(`{"event":"error"}`)); !errors.As(err, &se) {
		t.Errorf("Decode(bare error) = %v, want a *StreamError", err)
	}
}

// TestTelnyxEncode checks the frames sent as Telnyx reads them: the field
// names of its bidirectional RTP mode, and nothing else.
func TestTelnyxEncode(t *testing.T) {
	media, err := carrier.Telnyx.Media("32DE0DEA", telnyxAudio)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, media, map[string]any{
		"event": "media",
		"media": map[string]any{"payload": base64.StdEncoding.EncodeToString(telnyxAudio)},
	})
	// What is sent has the shape of what Telnyx sends: it reads back.
	ev, err := carrier.Telnyx.Decode(media)
	if err != nil || ev.Kind != carrier.Media || !bytes.Equal(ev.Audio, telnyxAudio) {
		t.Errorf("Decode(Media) = %+v, %v", ev, err)
	}

	mark, err := carrier.Telnyx.Mark("32DE0DEA", `phrase "3" <é>`)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, mark, map[string]any{"event": "mark", "mark": map[string]any{"name": `phrase "3" <é>`}})
	if ev, err := carrier.Telnyx.Decode(mark); err != nil || ev.Kind != carrier.Mark || ev.Mark != `phrase "3" <é>` {
		t.Errorf("Decode(Mark) = %+v, %v", ev, err)
	}

	clear, err := carrier.Telnyx.Clear("32DE0DEA")
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, clear, map[string]any{"event": "clear"})

	if _, err := carrier.Telnyx.Media("s", nil); err == nil {
		t.Error("Media(no audio) did not fail")
	}
	if _, err := carrier.Telnyx.Media("s", make([]byte, 30*8000+1)); err == nil {
		t.Error("Media(more than 30 s) did not fail")
	}
	if _, err := carrier.Telnyx.Media("s", make([]byte, 30*8000)); err != nil {
		t.Errorf("Media(30 s) = %v", err)
	}
	if _, err := carrier.Telnyx.Mark("s", ""); err == nil {
		t.Error("Mark(no name) did not fail")
	}
	if carrier.Telnyx.Name() != "telnyx" {
		t.Errorf("Name = %q", carrier.Telnyx.Name())
	}
}

// wantJSON checks that msg is one JSON object equal to want.
func wantJSON(t *testing.T, msg []byte, want map[string]any) {
	t.Helper()
	var got map[string]any
	if err := json.Unmarshal(msg, &got); err != nil {
		t.Fatalf("%s: %v", msg, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sent %s\nwant %v", msg, want)
	}
}

// texml is the part of TeXML that TelnyxTeXML writes, as Telnyx parses it.
type texml struct {
	XMLName xml.Name `xml:"Response"`
	Connect []struct {
		Stream []struct {
			URL                       string `xml:"url,attr"`
			Track                     string `xml:"track,attr"`
			Codec                     string `xml:"codec,attr"`
			BidirectionalMode         string `xml:"bidirectionalMode,attr"`
			BidirectionalCodec        string `xml:"bidirectionalCodec,attr"`
			BidirectionalSamplingRate string `xml:"bidirectionalSamplingRate,attr"`
			Parameter                 []struct {
				Name  string `xml:"name,attr"`
				Value string `xml:"value,attr"`
			}
		}
	}
	Verbs []xml.Name `xml:",any"`
}

func TestTelnyxTeXML(t *testing.T) {
	url := "wss://agent.example.com/v1/telnyx/stream?a=1&b=2"
	params := map[string]string{
		carrier.ParamToken: "Zm9v-LzE+Pz8=",
		carrier.ParamFrom:  "+13122010094",
		carrier.ParamTo:    "+13122123456",
		"note":             `"quoted" <tag> & 'apostrophe'` + "\n",
	}
	out := carrier.TelnyxTeXML(url, params)
	if !bytes.HasPrefix(out, []byte(`<?xml version="1.0" encoding="UTF-8"?>`)) {
		t.Errorf("no XML declaration: %s", out)
	}
	var doc texml
	if err := xml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if len(doc.Connect) != 1 || len(doc.Connect[0].Stream) != 1 || len(doc.Verbs) != 0 {
		t.Fatalf("want one <Connect><Stream> and nothing else: %s", out)
	}
	s := doc.Connect[0].Stream[0]
	if s.URL != url || s.Track != "inbound_track" || s.Codec != "PCMU" || s.BidirectionalMode != "rtp" ||
		s.BidirectionalCodec != "PCMU" || s.BidirectionalSamplingRate != "8000" {
		t.Errorf("Stream = %+v", s)
	}
	got := map[string]string{}
	var names []string
	for _, p := range s.Parameter {
		got[p.Name] = p.Value
		names = append(names, p.Name)
	}
	if !reflect.DeepEqual(got, params) {
		t.Errorf("parameters = %q, want %q", got, params)
	}
	if want := []string{"from", "note", "to", "token"}; !reflect.DeepEqual(names, want) {
		t.Errorf("parameters in the order %q, want %q", names, want)
	}

	// No parameters: a bare stream.
	if err := xml.Unmarshal(carrier.TelnyxTeXML("wss://h/s", nil), &doc); err != nil {
		t.Fatal(err)
	}
}

// TestTelnyxParamsRoundTrip: what the answer carries is what the start
// gives the transport, under the names it looks for.
func TestTelnyxParamsRoundTrip(t *testing.T) {
	params := map[string]string{carrier.ParamToken: "t0k", carrier.ParamFrom: "+15550001111", carrier.ParamTo: "+15550002222"}
	var doc texml
	if err := xml.Unmarshal(carrier.TelnyxTeXML("wss://h/s", params), &doc); err != nil {
		t.Fatal(err)
	}
	// Telnyx hands the <Parameter>s back as start.custom_parameters.
	custom := map[string]string{}
	for _, p := range doc.Connect[0].Stream[0].Parameter {
		custom[p.Name] = p.Value
	}
	start, _ := json.Marshal(map[string]any{
		"event": "start", "sequence_number": "1", "stream_id": "s1",
		"start": map[string]any{"call_control_id": "v3:c", "from": "+15550001111", "to": "+15550002222",
			"custom_parameters": custom, "media_format": map[string]any{"encoding": "PCMU", "sample_rate": 8000, "channels": 1}},
	})
	ev, err := carrier.Telnyx.Decode(start)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ev.Params, params) {
		t.Errorf("Params = %q, want %q", ev.Params, params)
	}
}
