package sip

import (
	"testing"
	"time"
)

// FuzzParseOffer checks that ParseOffer never panics, that what it accepts
// is usable (a port, an address, a known direction), and that the answer
// Holdline would build from it is SDP that ParseOffer reads back.
func FuzzParseOffer(f *testing.F) {
	for _, s := range sdpValidOffers() {
		f.Add([]byte(s))
	}
	f.Add([]byte(""))
	f.Add([]byte("v=0\r\n"))
	f.Add([]byte("v=0\r\no=- 1 1 IN IP4 192.0.2.1\r\ns=-\r\nc=IN IP4 192.0.2.1\r\nt=0 0\r\nm=image 5010 udptl t38\r\n"))

	f.Fuzz(func(t *testing.T, body []byte) {
		o, err := ParseOffer(body)
		if err != nil {
			return
		}
		if o.Port < 1 || o.Port > 65535 {
			t.Fatalf("Port %d out of range", o.Port)
		}
		if !o.Addr.IsValid() {
			t.Fatalf("Addr %v invalid", o.Addr)
		}
		switch o.Direction {
		case "sendrecv", "sendonly", "recvonly", "inactive":
		default:
			t.Fatalf("Direction %q", o.Direction)
		}

		c, err := Negotiate(o, []string{"PCMU", "PCMA", "opus"})
		if err != nil {
			c = Codec{PayloadType: 0, Name: "PCMU", ClockRate: 8000, Channels: 1}
		}
		ptime := o.Ptime
		if ptime == 0 {
			ptime = 20 * time.Millisecond
		}
		a := Answer{
			Addr:           o.Addr,
			Port:           o.Port,
			Codec:          c,
			TelephoneEvent: o.TelephoneEvent,
			Direction:      AnswerDirection(o),
			SessionID:      1,
			Version:        2,
			Ptime:          ptime,
		}
		body2 := a.Marshal()
		back, err := ParseOffer(body2)
		if err != nil {
			t.Fatalf("ParseOffer(Answer.Marshal()) = %v\nanswer:\n%s\noffer:\n%q", err, body2, body)
		}
		if back.Addr != a.Addr || back.Port != a.Port || back.Direction != a.Direction {
			t.Fatalf("answer read back as %+v, want %+v", back, a)
		}
	})
}
