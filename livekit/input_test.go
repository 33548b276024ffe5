package livekit

import (
	"testing"

	lkproto "github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"
)

// A phone line bridged in by LiveKit's SIP service echoes: its input gets
// the echo canceller and the echo-aware barge-in. A browser or an app
// cancels its own echo: its input is echo-free, unless the transport is
// told to cancel echo for everyone.
func TestInputIsEchoFreeForAppsAndCancelledForPhones(t *testing.T) {
	r := &room{t: &Transport{}}
	phone := r.input(lksdk.ParticipantKind(lkproto.ParticipantInfo_SIP))
	if phone.EchoFree || phone.NoEchoCancellation {
		t.Errorf("a SIP participant's input: %+v; want echo cancelled, not echo-free", phone)
	}
	app := r.input(lksdk.ParticipantKind(lkproto.ParticipantInfo_STANDARD))
	if !app.EchoFree || !app.NoEchoCancellation {
		t.Errorf("a standard participant's input: %+v; want echo-free", app)
	}
	all := (&room{t: &Transport{cfg: config{echoCancelAll: true}}}).input(lksdk.ParticipantKind(lkproto.ParticipantInfo_STANDARD))
	if all.EchoFree || all.NoEchoCancellation {
		t.Errorf("with WithEchoCancellation(true): %+v; want echo cancelled", all)
	}
	if phone.Rate != inputRate || app.Rate != inputRate {
		t.Errorf("rates %d and %d; want %d", phone.Rate, app.Rate, inputRate)
	}
}

// A key is the packet's digit, else its RFC 4733 code.
func TestDTMFDigitFromLiveKitsPackets(t *testing.T) {
	for _, c := range []struct {
		d    *lkproto.SipDTMF
		want rune
	}{
		{&lkproto.SipDTMF{Code: 1, Digit: "1"}, '1'},
		{&lkproto.SipDTMF{Code: 11, Digit: "#"}, '#'},
		{&lkproto.SipDTMF{Code: 10}, '*'},
		{&lkproto.SipDTMF{Digit: "a"}, 'A'},
		{&lkproto.SipDTMF{Code: 99, Digit: "x"}, 0},
	} {
		if got := dtmfDigit(c.d); got != c.want {
			t.Errorf("dtmfDigit(%v) = %q; want %q", c.d, got, c.want)
		}
	}
}
