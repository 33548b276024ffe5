package webrtc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/webrtc"
	"github.com/holdline/holdline/webrtc/rtctest"
)

// A WHIP-style endpoint of one's own: one POST carries the client's offer
// and gets the complete answer back. What the client sends on the data
// channel reaches Handler.Message; Peer.Send and Peer.WriteFrame go the
// other way. (Package server does all this, and runs a session on the
// peer; this is the transport alone.)
func ExampleTransport_Answer() {
	// Loopback only, as befits an example: without WithInterfaces every
	// interface is used.
	tr, err := webrtc.NewTransport(webrtc.WithInterfaces("lo"))
	if err != nil {
		log.Fatal(err)
	}
	messages := make(chan string, 16)
	peers := make(chan *webrtc.Peer, 1)
	endpoint := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		offer, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		p, err := tr.Answer(r.Context(), string(offer), webrtc.Handler{
			Message: func(b []byte) { messages <- string(b) },
		})
		if errors.Is(err, webrtc.ErrBadOffer) {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		} else if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		peers <- p
		w.Header().Set("Content-Type", "application/sdp")
		w.Header().Set("Location", "/v1/sessions/example")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, p.Answer())
	})
	hs := httptest.NewServer(endpoint)
	defer hs.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The client: a pion peer that does what a browser does (it posts to
	// /v1/sessions, and says hello when its data channel opens).
	c, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	p := <-peers
	defer p.Close()
	fmt.Println("client:", <-messages)
	if err := c.SendText("Is anyone there?"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("client:", <-messages)

	// The server's side: a message, and 200 ms of a tone at 24 kHz.
	if err := p.Send([]byte(`{"type":"caption","text":"Yes, hello!"}`)); err != nil {
		log.Fatal(err)
	}
	for i := range 10 {
		f := media.Frame{Samples: make([]int16, 480), SampleRate: media.Rate24k}
		for j := range f.Samples {
			f.Samples[j] = int16(8000 * math.Sin(2*math.Pi*440*float64(i*480+j)/24000))
		}
		p.WriteFrame(f)
	}
	err = c.Wait(ctx, "the caption and the tone", func(c *rtctest.Client) bool {
		heard := false
		for _, l := range c.Levels() {
			heard = heard || l.RMS > 0.1
		}
		return heard && len(c.Captions()) > 0
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("server: caption", c.Captions()[0], "and a tone")
	// Output:
	// client: {"after":0,"type":"hello"}
	// client: {"text":"Is anyone there?","type":"text"}
	// server: caption Yes, hello! and a tone
}

// An offer Answer cannot use is refused with ErrBadOffer and the reason, for
// a 400.
func ExampleTransport_Answer_badOffer() {
	tr, err := webrtc.NewTransport(webrtc.WithInterfaces("lo"))
	if err != nil {
		log.Fatal(err)
	}
	video := "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\nc=IN IP4 0.0.0.0\r\na=rtpmap:96 VP8/90000\r\n"
	_, err = tr.Answer(context.Background(), video, webrtc.Handler{})
	fmt.Println(errors.Is(err, webrtc.ErrBadOffer))
	fmt.Println(err)
	// Output:
	// true
	// webrtc: bad offer: the offer has no audio section
}
