package sip

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sdpLF turns a readable SDP written with LF into the CRLF form on the
// wire.
func sdpLF(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

// sdpSippOffer is the body of the INVITE in sipp's built-in uac scenario.
const sdpSippOffer = `v=0
o=user1 53655765 2353687637 IN IP4 127.0.0.1
s=-
c=IN IP4 127.0.0.1
t=0 0
m=audio 6000 RTP/AVP 0
a=rtpmap:0 PCMU/8000
`

// sdpBaresipOffer is an offer as baresip makes one, with opus first.
const sdpBaresipOffer = `v=0
o=- 2890844526 2890844527 IN IP4 192.168.1.20
s=-
c=IN IP4 192.168.1.20
t=0 0
m=audio 10004 RTP/AVP 96 0 8 101
b=AS:96
a=rtpmap:96 opus/48000/2
a=fmtp:96 stereo=1;sprop-stereo=1
a=rtpmap:0 PCMU/8000
a=rtpmap:8 PCMA/8000
a=rtpmap:101 telephone-event/8000
a=fmtp:101 0-15
a=sendrecv
a=label:1
a=ssrc:2430709021 cname:ab12cd34
a=rtcp-rsize
a=ptime:20
`

// sdpMediaConnOffer has a session-level c= that the audio stream's own
// c= overrides, as an SBC in front of a phone writes it.
const sdpMediaConnOffer = `v=0
o=- 1 1 IN IP4 10.0.0.1
s=call
c=IN IP4 10.0.0.1
t=0 0
m=audio 30000 RTP/AVP 8 0
c=IN IP4 203.0.113.7
a=sendrecv
`

// sdpHold returns an offer from 192.0.2.5:4000 with the given c= address
// and direction attribute line (may be "").
func sdpHold(addr, dir string) string {
	s := "v=0\no=- 7 8 IN IP4 192.0.2.5\ns=-\nc=IN IP4 " + addr + "\nt=0 0\nm=audio 4000 RTP/AVP 0 101\na=rtpmap:0 PCMU/8000\na=rtpmap:101 telephone-event/8000\na=fmtp:101 0-16\n"
	if dir != "" {
		s += "a=" + dir + "\n"
	}
	return s
}

// sdpValidOffers are offers ParseOffer takes; the fuzz target starts from
// them too.
func sdpValidOffers() []string {
	return []string{
		sdpLF(sdpSippOffer),
		sdpSippOffer,
		sdpLF(sdpBaresipOffer),
		sdpLF(sdpMediaConnOffer),
		sdpLF(sdpHold("192.0.2.5", "sendonly")),
		sdpLF(sdpHold("192.0.2.5", "inactive")),
		sdpLF(sdpHold("0.0.0.0", "")),
		sdpLF("v=0\no=- 1 1 IN IP6 2001:db8::1\ns=-\nc=IN IP6 2001:db8::1\nt=0 0\nm=audio 5004 RTP/AVP 8 0 18\na=recvonly\n"),
		sdpLF("v=0\no=- 1 1 IN IP4 192.0.2.1\ns=-\nt=0 0\nm=video 5006 RTP/AVP 96\na=rtpmap:96 VP8/90000\nm=audio 0 RTP/AVP 0\nm=audio 5008 RTP/AVP 0\nc=IN IP4 192.0.2.9\nm=image 5010 udptl t38\n"),
	}
}

func TestParseOfferSDP(t *testing.T) {
	pcmu := Codec{PayloadType: 0, Name: "PCMU", ClockRate: 8000, Channels: 1}
	pcma := Codec{PayloadType: 8, Name: "PCMA", ClockRate: 8000, Channels: 1}
	te := func(pt uint8, fmtp string) *Codec {
		return &Codec{PayloadType: pt, Name: "telephone-event", ClockRate: 8000, Channels: 1, Fmtp: fmtp}
	}
	sipp := MediaOffer{
		Addr:      netip.MustParseAddr("127.0.0.1"),
		Port:      6000,
		Codecs:    []Codec{pcmu},
		Direction: "sendrecv",
	}
	hold := func(addr, dir string) MediaOffer {
		return MediaOffer{
			Addr:           netip.MustParseAddr(addr),
			Port:           4000,
			Codecs:         []Codec{pcmu},
			TelephoneEvent: te(101, "0-16"),
			Direction:      dir,
		}
	}

	tests := []struct {
		name string
		body string
		want MediaOffer
	}{
		{"sipp uac CRLF", sdpLF(sdpSippOffer), sipp},
		{"sipp uac LF", sdpSippOffer, sipp},
		{"no final line ending", strings.TrimSuffix(sdpLF(sdpSippOffer), "\r\n"), sipp},
		{"blank lines", strings.ReplaceAll(sdpSippOffer, "t=0 0\n", "t=0 0\n\n\r\n"), sipp},
		{"baresip", sdpLF(sdpBaresipOffer), MediaOffer{
			Addr: netip.MustParseAddr("192.168.1.20"),
			Port: 10004,
			Codecs: []Codec{
				{PayloadType: 96, Name: "opus", ClockRate: 48000, Channels: 2, Fmtp: "stereo=1;sprop-stereo=1"},
				pcmu, pcma,
			},
			TelephoneEvent: te(101, "0-15"),
			Direction:      "sendrecv",
			Ptime:          20 * time.Millisecond,
		}},
		{"media c= overrides session c=", sdpLF(sdpMediaConnOffer), MediaOffer{
			Addr:      netip.MustParseAddr("203.0.113.7"),
			Port:      30000,
			Codecs:    []Codec{pcma, pcmu},
			Direction: "sendrecv",
		}},
		{"media c= only", "v=0\no=- 1 1 IN IP4 10.0.0.1\ns=-\nt=0 0\nm=audio 30000 RTP/AVP 0\nc=IN IP4 203.0.113.8\n", MediaOffer{
			Addr: netip.MustParseAddr("203.0.113.8"), Port: 30000, Codecs: []Codec{pcmu}, Direction: "sendrecv",
		}},
		{"multicast c= with ttl", "v=0\no=- 1 1 IN IP4 10.0.0.1\ns=-\nc=IN IP4 233.252.0.1/127\nt=0 0\nm=audio 30000 RTP/AVP 0\n", MediaOffer{
			Addr: netip.MustParseAddr("233.252.0.1"), Port: 30000, Codecs: []Codec{pcmu}, Direction: "sendrecv",
		}},
		{"hold sendonly", sdpLF(sdpHold("192.0.2.5", "sendonly")), hold("192.0.2.5", "sendonly")},
		{"hold inactive", sdpLF(sdpHold("192.0.2.5", "inactive")), hold("192.0.2.5", "inactive")},
		{"hold c=0.0.0.0", sdpLF(sdpHold("0.0.0.0", "")), hold("0.0.0.0", "sendrecv")},
		{"session direction", strings.Replace(sdpSippOffer, "t=0 0\n", "t=0 0\na=sendonly\n", 1),
			MediaOffer{Addr: sipp.Addr, Port: 6000, Codecs: []Codec{pcmu}, Direction: "sendonly"}},
		{"media direction overrides session", strings.Replace(sdpSippOffer, "t=0 0\n", "t=0 0\na=inactive\n", 1) + "a=recvonly\n",
			MediaOffer{Addr: sipp.Addr, Port: 6000, Codecs: []Codec{pcmu}, Direction: "recvonly"}},
		{"IPv6, static types without rtpmap", sdpValidOffers()[7], MediaOffer{
			Addr:      netip.MustParseAddr("2001:db8::1"),
			Port:      5004,
			Codecs:    []Codec{pcma, pcmu, {PayloadType: 18, Name: "G729", ClockRate: 8000, Channels: 1}},
			Direction: "recvonly",
		}},
		{"first audio line with a port, among others", sdpValidOffers()[8], MediaOffer{
			Addr: netip.MustParseAddr("192.0.2.9"), Port: 5008, Codecs: []Codec{pcmu}, Direction: "sendrecv",
		}},
		{"dynamic type without rtpmap, duplicate format", "v=0\no=- 1 1 IN IP4 10.0.0.1\ns=-\nc=IN IP4 10.0.0.1\nt=0 0\nm=audio 7078 RTP/AVP 0 97 0\na=ptime:30\n", MediaOffer{
			Addr:      netip.MustParseAddr("10.0.0.1"),
			Port:      7078,
			Codecs:    []Codec{pcmu, {PayloadType: 97, Channels: 1}},
			Direction: "sendrecv",
			Ptime:     30 * time.Millisecond,
		}},
		{"telephone-event at 48 kHz is not DTMF for us", "v=0\no=- 1 1 IN IP4 10.0.0.1\ns=-\nc=IN IP4 10.0.0.1\nt=0 0\nm=audio 7078 RTP/AVP 111 110\na=rtpmap:111 opus/48000/2\na=rtpmap:110 telephone-event/48000\na=ptime:banana\n", MediaOffer{
			Addr:      netip.MustParseAddr("10.0.0.1"),
			Port:      7078,
			Codecs:    []Codec{{PayloadType: 111, Name: "opus", ClockRate: 48000, Channels: 2}},
			Direction: "sendrecv",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseOffer([]byte(tt.body))
			if err != nil {
				t.Fatalf("ParseOffer: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseOffer =\n%+v\nwant\n%+v", sdpShow(got), sdpShow(tt.want))
			}
		})
	}
}

// sdpShow prints o with TelephoneEvent's value, not its address.
func sdpShow(o MediaOffer) string {
	te := "nil"
	if o.TelephoneEvent != nil {
		te = fmt.Sprintf("%+v", *o.TelephoneEvent)
	}
	return fmt.Sprintf("{Addr:%v Port:%d Codecs:%+v TelephoneEvent:%s Direction:%q Ptime:%v}",
		o.Addr, o.Port, o.Codecs, te, o.Direction, o.Ptime)
}

func TestParseOfferErrorsSDP(t *testing.T) {
	sipp := sdpLF(sdpSippOffer)
	tests := []struct {
		name string
		body string
		want error
	}{
		{"empty", "", ErrBadSDP},
		{"only line breaks and spaces", "\r\n \r\n\n", ErrBadSDP},
		{"garbage", "hello, this is not SDP\r\n", ErrBadSDP},
		{"binary", "\x00\xff\x01=\x02", ErrBadSDP},
		{"SIP message instead of body", "INVITE sip:bob@example.com SIP/2.0\r\nVia: SIP/2.0/UDP pc33.example.com\r\n\r\n", ErrBadSDP},
		{"truncated after v=", "v=0\r\n", ErrBadSDP},
		{"truncated before t=", sipp[:strings.Index(sipp, "t=")], ErrBadSDP},
		{"truncated in m=", sipp[:strings.Index(sipp, "m=audio")+len("m=audio 60")], ErrBadSDP},
		{"truncated in c=", sipp[:strings.Index(sipp, "c=")+len("c=IN IP4 127.0")], ErrBadSDP},
		{"no m= line", sipp[:strings.Index(sipp, "m=")], ErrNoAudio},
		{"version 1", strings.Replace(sipp, "v=0", "v=1", 1), ErrBadSDP},
		{"no c= anywhere", strings.Replace(sipp, "c=IN IP4 127.0.0.1\r\n", "", 1), ErrBadSDP},
		{"c= without address", strings.Replace(sipp, "c=IN IP4 127.0.0.1", "c=IN IP4", 1), ErrBadSDP},
		{"c= host name", strings.Replace(sipp, "c=IN IP4 127.0.0.1", "c=IN IP4 pbx.example.com", 1), ErrBadSDP},
		{"c= IP4 with an IPv6 address", strings.Replace(sipp, "c=IN IP4 127.0.0.1", "c=IN IP4 ::1", 1), ErrBadSDP},
		{"c= IP6 with an IPv4 address", strings.Replace(sipp, "c=IN IP4 127.0.0.1", "c=IN IP6 127.0.0.1", 1), ErrBadSDP},
		{"c= with a zone", strings.Replace(sipp, "c=IN IP4 127.0.0.1", "c=IN IP6 fe80::1%eth0", 1), ErrBadSDP},
		{"port too big", strings.Replace(sipp, "6000", "70000", 1), ErrBadSDP},
		{"port negative", strings.Replace(sipp, "6000", "-1", 1), ErrBadSDP},
		{"port not a number", strings.Replace(sipp, "6000", "six", 1), ErrBadSDP},
		{"payload type too big", strings.Replace(sipp, "RTP/AVP 0", "RTP/AVP 0 200", 1), ErrBadSDP},
		{"payload type not a number", strings.Replace(sipp, "RTP/AVP 0", "RTP/AVP pcmu", 1), ErrBadSDP},
		{"no formats", strings.Replace(sipp, "RTP/AVP 0", "RTP/AVP", 1), ErrBadSDP},
		{"rtpmap without rate", strings.Replace(sipp, "PCMU/8000", "PCMU", 1), ErrBadSDP},
		{"rtpmap bad rate", strings.Replace(sipp, "PCMU/8000", "PCMU/fast", 1), ErrBadSDP},
		{"rtpmap bad channels", strings.Replace(sipp, "PCMU/8000", "PCMU/8000/0", 1), ErrBadSDP},
		{"video only", sdpLF("v=0\no=- 1 1 IN IP4 192.0.2.1\ns=-\nc=IN IP4 192.0.2.1\nt=0 0\nm=video 5006 RTP/AVP 96\na=rtpmap:96 H264/90000\n"), ErrNoAudio},
		{"T.38 fax only", sdpLF("v=0\no=- 1 1 IN IP4 192.0.2.1\ns=-\nc=IN IP4 192.0.2.1\nt=0 0\nm=image 5010 udptl t38\na=T38FaxVersion:0\n"), ErrNoAudio},
		{"audio port 0", strings.Replace(sipp, "6000", "0", 1), ErrNoAudio},
		{"audio port 0 and fax", strings.Replace(sipp, "6000", "0", 1) + "m=image 5010 udptl t38\r\n", ErrNoAudio},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseOffer([]byte(tt.body))
			if !errors.Is(err, tt.want) {
				t.Fatalf("ParseOffer = %+v, %v; want error %v", got, err, tt.want)
			}
			if err.Error() == tt.want.Error() {
				t.Errorf("error %q does not say why", err)
			}
			if !reflect.DeepEqual(got, MediaOffer{}) {
				t.Errorf("ParseOffer returned %+v with its error", got)
			}
		})
	}
}

func TestNegotiateSDP(t *testing.T) {
	pcmu := Codec{PayloadType: 0, Name: "PCMU", ClockRate: 8000, Channels: 1}
	pcma := Codec{PayloadType: 8, Name: "PCMA", ClockRate: 8000, Channels: 1}
	opus := Codec{PayloadType: 96, Name: "opus", ClockRate: 48000, Channels: 2, Fmtp: "useinbandfec=1"}
	g729 := Codec{PayloadType: 18, Name: "G729", ClockRate: 8000, Channels: 1}
	all := []string{"PCMU", "PCMA", "opus"}

	tests := []struct {
		name    string
		offered []Codec
		prefer  []string
		want    Codec
		wantErr bool
	}{
		{"offer order wins: opus first", []Codec{opus, pcmu, pcma}, all, opus, false},
		{"offer order wins: PCMA first", []Codec{pcma, pcmu}, all, pcma, false},
		{"offer order wins over prefer order", []Codec{pcma, pcmu}, []string{"PCMU", "PCMA"}, pcma, false},
		{"unsupported skipped", []Codec{g729, pcmu}, all, pcmu, false},
		{"prefer limits", []Codec{opus, pcma, pcmu}, []string{"PCMU"}, pcmu, false},
		{"names case-insensitive", []Codec{{PayloadType: 0, Name: "pcmu", ClockRate: 8000, Channels: 1}}, []string{"Pcmu"}, Codec{PayloadType: 0, Name: "pcmu", ClockRate: 8000, Channels: 1}, false},
		{"wrong clock rate skipped", []Codec{{PayloadType: 97, Name: "opus", ClockRate: 16000, Channels: 1}, pcma}, all, pcma, false},
		{"only G729", []Codec{g729}, all, Codec{}, true},
		{"nothing we prefer", []Codec{opus}, []string{"PCMU", "PCMA"}, Codec{}, true},
		{"prefer names an unsupported codec", []Codec{g729}, []string{"G729"}, Codec{}, true},
		{"no codecs", nil, all, Codec{}, true},
		{"no preference", []Codec{pcmu}, nil, Codec{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Negotiate(MediaOffer{Codecs: tt.offered}, tt.prefer)
			if tt.wantErr {
				if !errors.Is(err, ErrNoCommonCodec) {
					t.Fatalf("Negotiate = %+v, %v; want ErrNoCommonCodec", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Negotiate = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestNegotiateNoCommonCodecSaysWhatSDP(t *testing.T) {
	body := sdpLF("v=0\no=- 1 1 IN IP4 192.0.2.1\ns=-\nc=IN IP4 192.0.2.1\nt=0 0\nm=audio 5004 RTP/AVP 18 101\na=rtpmap:18 G729/8000\na=fmtp:18 annexb=no\na=rtpmap:101 telephone-event/8000\n")
	o, err := ParseOffer([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Negotiate(o, []string{"PCMU", "PCMA", "opus"})
	if !errors.Is(err, ErrNoCommonCodec) {
		t.Fatalf("Negotiate: %v, want ErrNoCommonCodec", err)
	}
	if !strings.Contains(err.Error(), "G729/8000") {
		t.Errorf("error %q does not name the offered codec", err)
	}
}

func TestAnswerDirectionSDP(t *testing.T) {
	tests := []struct {
		dir, addr, want string
	}{
		{"sendrecv", "192.0.2.5", "sendrecv"},
		{"sendonly", "192.0.2.5", "recvonly"},
		{"recvonly", "192.0.2.5", "sendonly"},
		{"inactive", "192.0.2.5", "inactive"},
		{"", "192.0.2.5", "sendrecv"},
		{"sendrecv", "0.0.0.0", "recvonly"},
		{"sendonly", "0.0.0.0", "recvonly"},
		{"recvonly", "0.0.0.0", "inactive"},
		{"inactive", "0.0.0.0", "inactive"},
		{"sendrecv", "::", "recvonly"},
		{"sendrecv", "2001:db8::5", "sendrecv"},
	}
	for _, tt := range tests {
		t.Run(tt.dir+"@"+tt.addr, func(t *testing.T) {
			o := MediaOffer{Addr: netip.MustParseAddr(tt.addr), Port: 4000, Direction: tt.dir}
			if got := AnswerDirection(o); got != tt.want {
				t.Errorf("AnswerDirection = %q, want %q", got, tt.want)
			}
		})
	}
	// Hold offers end to end, as a caller puts Holdline on hold.
	for body, want := range map[string]string{
		sdpHold("192.0.2.5", "sendonly"): "recvonly",
		sdpHold("192.0.2.5", "inactive"): "inactive",
		sdpHold("0.0.0.0", ""):           "recvonly",
		sdpHold("0.0.0.0", "sendonly"):   "recvonly",
		sdpHold("192.0.2.5", ""):         "sendrecv",
	} {
		o, err := ParseOffer([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if got := AnswerDirection(o); got != want {
			t.Errorf("AnswerDirection(%+v) = %q, want %q", o, got, want)
		}
	}
}

func TestAnswerMarshalSDP(t *testing.T) {
	a := Answer{
		Addr:           netip.MustParseAddr("198.51.100.10"),
		Port:           20000,
		Codec:          Codec{PayloadType: 0, Name: "PCMU", ClockRate: 8000, Channels: 1},
		TelephoneEvent: &Codec{PayloadType: 101, Name: "telephone-event", ClockRate: 8000, Channels: 1, Fmtp: "0-15"},
		Direction:      "sendrecv",
		SessionID:      42,
		Version:        3,
		Ptime:          20 * time.Millisecond,
	}
	want := sdpLF(`v=0
o=holdline 42 3 IN IP4 198.51.100.10
s=Holdline
c=IN IP4 198.51.100.10
t=0 0
m=audio 20000 RTP/AVP 0 101
a=rtpmap:0 PCMU/8000
a=rtpmap:101 telephone-event/8000
a=fmtp:101 0-16
a=ptime:20
a=sendrecv
`)
	if got := string(a.Marshal()); got != want {
		t.Errorf("Marshal =\n%s\nwant\n%s", got, want)
	}
}

func TestAnswerRoundTripSDP(t *testing.T) {
	te := func(pt uint8) *Codec {
		return &Codec{PayloadType: pt, Name: "telephone-event", ClockRate: 8000, Channels: 1, Fmtp: "0-16"}
	}
	tests := []struct {
		name string
		a    Answer
	}{
		{"PCMU with DTMF", Answer{
			Addr: netip.MustParseAddr("198.51.100.10"), Port: 20000,
			Codec:          Codec{PayloadType: 0, Name: "PCMU", ClockRate: 8000, Channels: 1},
			TelephoneEvent: te(101), Direction: "sendrecv", SessionID: 1, Version: 1, Ptime: 20 * time.Millisecond,
		}},
		{"PCMA, no DTMF, hold", Answer{
			Addr: netip.MustParseAddr("198.51.100.10"), Port: 20002,
			Codec:     Codec{PayloadType: 8, Name: "PCMA", ClockRate: 8000, Channels: 1},
			Direction: "recvonly", SessionID: 1, Version: 2, Ptime: 20 * time.Millisecond,
		}},
		{"opus with fmtp, IPv6", Answer{
			Addr: netip.MustParseAddr("2001:db8::10"), Port: 40000,
			Codec:          Codec{PayloadType: 96, Name: "opus", ClockRate: 48000, Channels: 2, Fmtp: "useinbandfec=1"},
			TelephoneEvent: te(100), Direction: "inactive", SessionID: 1<<63 + 5, Version: 9, Ptime: 20 * time.Millisecond,
		}},
		{"sendonly without ptime", Answer{
			Addr: netip.MustParseAddr("10.1.2.3"), Port: 1,
			Codec:     Codec{PayloadType: 0, Name: "PCMU", ClockRate: 8000, Channels: 1},
			Direction: "sendonly", SessionID: 7, Version: 7,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.a.Marshal()
			got, err := ParseOffer(body)
			if err != nil {
				t.Fatalf("ParseOffer(Marshal()): %v\n%s", err, body)
			}
			want := MediaOffer{
				Addr:           tt.a.Addr,
				Port:           tt.a.Port,
				Codecs:         []Codec{tt.a.Codec},
				TelephoneEvent: tt.a.TelephoneEvent,
				Direction:      tt.a.Direction,
				Ptime:          tt.a.Ptime,
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("round trip =\n%s\nwant\n%s\nSDP:\n%s", sdpShow(got), sdpShow(want), body)
			}
			if c, err := Negotiate(got, []string{"PCMU", "PCMA", "opus"}); err != nil || c != tt.a.Codec {
				t.Errorf("Negotiate(round trip) = %+v, %v; want %+v", c, err, tt.a.Codec)
			}
		})
	}
}

func TestAnswerMarshalDefaultsSDP(t *testing.T) {
	a := Answer{
		Port:           5000,
		Codec:          Codec{PayloadType: 0, Name: "PCMU", ClockRate: 8000},
		TelephoneEvent: &Codec{PayloadType: 0, Name: "telephone-event", ClockRate: 8000},
		Direction:      "sideways",
		Ptime:          20 * time.Millisecond,
	}
	got, err := ParseOffer(a.Marshal())
	if err != nil {
		t.Fatalf("ParseOffer(Marshal()): %v\n%s", err, a.Marshal())
	}
	if got.Addr != netip.IPv4Unspecified() || got.Direction != "sendrecv" || got.TelephoneEvent != nil || len(got.Codecs) != 1 {
		t.Errorf("zero Addr, bad Direction, clashing telephone-event: got %s", sdpShow(got))
	}
	// A value from a remote SDP cannot add lines to ours.
	a = Answer{
		Addr:  netip.MustParseAddr("192.0.2.1"),
		Port:  5000,
		Codec: Codec{PayloadType: 96, Name: "opus", ClockRate: 48000, Channels: 2, Fmtp: "x=1\r\na=inactive"},
	}
	body := string(a.Marshal())
	if strings.Contains(body, "\na=inactive") {
		t.Errorf("Fmtp injected a line:\n%s", body)
	}
}

func TestNewOfferSDP(t *testing.T) {
	body := NewOffer(netip.MustParseAddr("192.0.2.44"), 16384, 1000, 1)
	want := sdpLF(`v=0
o=holdline 1000 1 IN IP4 192.0.2.44
s=Holdline
c=IN IP4 192.0.2.44
t=0 0
m=audio 16384 RTP/AVP 0 8 111 101
a=rtpmap:0 PCMU/8000
a=rtpmap:8 PCMA/8000
a=rtpmap:111 opus/48000/2
a=rtpmap:101 telephone-event/8000
a=fmtp:101 0-16
a=ptime:20
a=sendrecv
`)
	if string(body) != want {
		t.Errorf("NewOffer =\n%s\nwant\n%s", body, want)
	}

	for _, addr := range []string{"192.0.2.44", "2001:db8::44"} {
		o, err := ParseOffer(NewOffer(netip.MustParseAddr(addr), 16384, 1000, 1))
		if err != nil {
			t.Fatalf("ParseOffer(NewOffer(%s)): %v", addr, err)
		}
		wantO := MediaOffer{
			Addr: netip.MustParseAddr(addr),
			Port: 16384,
			Codecs: []Codec{
				{PayloadType: 0, Name: "PCMU", ClockRate: 8000, Channels: 1},
				{PayloadType: 8, Name: "PCMA", ClockRate: 8000, Channels: 1},
				{PayloadType: 111, Name: "opus", ClockRate: 48000, Channels: 2},
			},
			TelephoneEvent: &Codec{PayloadType: 101, Name: "telephone-event", ClockRate: 8000, Channels: 1, Fmtp: "0-16"},
			Direction:      "sendrecv",
			Ptime:          20 * time.Millisecond,
		}
		if !reflect.DeepEqual(o, wantO) {
			t.Errorf("round trip =\n%s\nwant\n%s", sdpShow(o), sdpShow(wantO))
		}
		if AnswerDirection(o) != "sendrecv" {
			t.Errorf("AnswerDirection = %q", AnswerDirection(o))
		}
	}
}

func ExampleParseOffer() {
	offer := "v=0\r\n" +
		"o=user1 53655765 2353687637 IN IP4 127.0.0.1\r\n" +
		"s=-\r\n" +
		"c=IN IP4 127.0.0.1\r\n" +
		"t=0 0\r\n" +
		"m=audio 6000 RTP/AVP 8 0 101\r\n" +
		"a=rtpmap:101 telephone-event/8000\r\n" +
		"a=fmtp:101 0-16\r\n" +
		"a=sendonly\r\n"

	o, err := ParseOffer([]byte(offer))
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := Negotiate(o, []string{"PCMU", "PCMA", "opus"})
	if err != nil {
		fmt.Println(err) // 488
		return
	}
	fmt.Printf("send to %v:%d as %s/%d (payload type %d), DTMF on %d\n",
		o.Addr, o.Port, c.Name, c.ClockRate, c.PayloadType, o.TelephoneEvent.PayloadType)
	fmt.Println("they are", o.Direction, "so we answer", AnswerDirection(o))

	_, err = ParseOffer([]byte("v=0\r\nm=video"))
	fmt.Println(errors.Is(err, ErrBadSDP))
	// Output:
	// send to 127.0.0.1:6000 as PCMA/8000 (payload type 8), DTMF on 101
	// they are sendonly so we answer recvonly
	// true
}
