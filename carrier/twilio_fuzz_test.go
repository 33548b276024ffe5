package carrier_test

import (
	"errors"
	"testing"

	"github.com/holdline/holdline/carrier"
)

// Whatever a socket carries, the Twilio decoder returns an event or one
// of its two errors, and never panics; an event it returns has what its
// kind needs.
func FuzzTwilioDecode(f *testing.F) {
	for _, s := range []string{
		`{"event":"connected","protocol":"Call","version":"1.0.0"}`,
		`{"event":"start","sequenceNumber":"1","start":{"accountSid":"AC1","streamSid":"MZ1","callSid":"CA1","tracks":["inbound"],"customParameters":{"token":"t"},"mediaFormat":{"encoding":"audio/x-mulaw","sampleRate":8000,"channels":1}},"streamSid":"MZ1"}`,
		`{"event":"media","sequenceNumber":"3","media":{"track":"inbound","chunk":"1","timestamp":"5","payload":"/////w=="},"streamSid":"MZ1"}`,
		`{"event":"dtmf","streamSid":"MZ1","sequenceNumber":"5","dtmf":{"track":"inbound_track","digit":"1"}}`,
		`{"event":"mark","sequenceNumber":"4","streamSid":"MZ1","mark":{"name":"h1.1"}}`,
		`{"event":"stop","sequenceNumber":"5","streamSid":"MZ1","stop":{"accountSid":"AC1","callSid":"CA1"}}`,
		`{"event":"media","media":{"payload":"!!"}}`, `{`, `null`, `[]`, `{"event":7}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		ev, err := carrier.Twilio.Decode(msg)
		if err != nil {
			if !errors.Is(err, carrier.ErrMalformed) && !errors.Is(err, carrier.ErrUnknownEvent) {
				t.Fatalf("Decode(%q): %v, neither malformed nor unknown", msg, err)
			}
			return
		}
		switch ev.Kind {
		case carrier.Start:
			if ev.StreamID == "" || ev.CallID == "" {
				t.Fatalf("start without ids: %+v", ev)
			}
		case carrier.Media:
			if len(ev.Audio) == 0 || len(ev.Audio) > 8002 {
				t.Fatalf("media of %d bytes", len(ev.Audio))
			}
		case carrier.DTMF:
			if len(ev.Digit) != 1 {
				t.Fatalf("dtmf %q", ev.Digit)
			}
		case carrier.Mark:
			if ev.Mark == "" {
				t.Fatal("mark without a name")
			}
		case carrier.Connected, carrier.Stop:
		default:
			t.Fatalf("kind %d", ev.Kind)
		}
	})
}

// Encoded messages decode to what was encoded (the phone reads what the
// server writes in the same JSON).
func TestTwilioEncodesWhatTwilioReads(t *testing.T) {
	tw := carrier.Twilio
	b, err := tw.Media(`MZ"1`, []byte{0xff, 0x00, 0x7f})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"event":"media","streamSid":"MZ\"1","media":{"payload":"/wB/"}}` {
		t.Errorf("media %s", b)
	}
	b, _ = tw.Mark("MZ1", "h1.2")
	if string(b) != `{"event":"mark","streamSid":"MZ1","mark":{"name":"h1.2"}}` {
		t.Errorf("mark %s", b)
	}
	b, _ = tw.Clear("MZ1")
	if string(b) != `{"event":"clear","streamSid":"MZ1"}` {
		t.Errorf("clear %s", b)
	}
}
