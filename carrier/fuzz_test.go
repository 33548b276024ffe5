package carrier_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/holdline/holdline/carrier"
)

// FuzzTelnyxDecode: whatever arrives, Decode does not panic, and returns
// either an event that says what the transport needs or an error the
// transport knows what to do with. What Media sends reads back as sent.
func FuzzTelnyxDecode(f *testing.F) {
	for _, s := range []string{
		telnyxConnected, telnyxStart, telnyxMedia, telnyxDTMF, telnyxMark, telnyxStop, telnyxErr,
		`{"event":"media","media":{"track":"outbound","payload":"/w=="}}`,
		`{"event":"media","sequence_number":9,"media":{"timestamp":180,"payload":"/38AgP8"}}`,
		`{"event":"start","stream_id":"s","start":{"custom_parameters":{"n":1,"b":true,"x":null}}}`,
		`{"event":"clear"}`, `{"event":""}`, `null`, `[]`, `"x"`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		checkDecode(t, carrier.Telnyx, msg)
		if len(msg) > 0 && len(msg) <= 30*8000 {
			checkMediaRoundTrip(t, carrier.Telnyx, msg)
		}
	})
}

// FuzzPlivoDecode: as FuzzTelnyxDecode, for Plivo.
func FuzzPlivoDecode(f *testing.F) {
	for _, s := range []string{
		plivoStart, plivoMedia, plivoDTMF, plivoPlayed, plivoCleared,
		`{"event":"start","start":{"callId":"c","streamId":"s"},"extra_headers":"userId=12345;sessionId=abc-xyz;;=;a="}`,
		`{"event":"start","start":{"streamId":"s","extra_headers":{"token":"abc","n":5}}}`,
		`{"event":"played","streamId":"s","name":"customer greeting audio"}`,
		`{"event":"stop"}`, `{"event":"playAudio","media":{"payload":"/w=="}}`, `{}`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		checkDecode(t, carrier.Plivo, msg)
	})
}

func checkDecode(t *testing.T, c carrier.Codec, msg []byte) {
	ev, err := c.Decode(msg)
	if err != nil {
		var se *carrier.StreamError
		if !errors.Is(err, carrier.ErrMalformed) && !errors.Is(err, carrier.ErrUnknownEvent) && !errors.As(err, &se) {
			t.Fatalf("Decode(%q): error %v is none the transport knows", msg, err)
		}
		if ev.Kind != 0 {
			t.Fatalf("Decode(%q) = %+v with error %v", msg, ev, err)
		}
		return
	}
	switch ev.Kind {
	case carrier.Start:
		if ev.StreamID == "" || ev.Params == nil {
			t.Fatalf("Decode(%q) = start %+v without a stream or its params", msg, ev)
		}
	case carrier.Media:
		if len(ev.Audio) == 0 {
			t.Fatalf("Decode(%q) = media without audio", msg)
		}
	case carrier.DTMF:
		if ev.Digit == "" {
			t.Fatalf("Decode(%q) = dtmf without a digit", msg)
		}
	case carrier.Mark:
		if ev.Mark == "" {
			t.Fatalf("Decode(%q) = mark without a name", msg)
		}
	case carrier.Connected, carrier.Cleared, carrier.Stop:
	default:
		t.Fatalf("Decode(%q) = %+v, kind %d, and no error", msg, ev, ev.Kind)
	}
}

// checkMediaRoundTrip: a codec whose media frames have the shape of the
// carrier's reads back what it sends.
func checkMediaRoundTrip(t *testing.T, c carrier.Codec, audio []byte) {
	out, err := c.Media("s", audio)
	if err != nil {
		t.Fatalf("Media(%d bytes): %v", len(audio), err)
	}
	ev, err := c.Decode(out)
	if err != nil || ev.Kind != carrier.Media || !bytes.Equal(ev.Audio, audio) {
		t.Fatalf("Decode(Media(%q)) = %+v, %v", audio, ev, err)
	}
}
