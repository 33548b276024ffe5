// Package rtctest is a WebRTC client for testing a Holdline server (package
// server) from Go: it does what the reference web page does, with pion, in
// process, and records what it hears.
//
// [Dial] posts an SDP offer to the server's /v1/sessions, as the page does
// (WHIP-style, with the bearer token and a resume token if given), and
// waits until the audio and the "holdline" data channel are up. Then the
// client
//
//   - sends its microphone: audio queued with [Client.Say] ([Tone] makes
//     some that any voice detector takes for speech), silence otherwise,
//     one Opus packet every 20 ms, noting when its sound started and
//     stopped ([Client.Onsets], [Client.Offsets]);
//   - decodes the agent's audio and keeps the level of every packet
//     ([Client.Levels]): when the agent spoke, and when it stopped;
//   - keeps what came on the data channel: the session's events
//     ([Client.Events], [Client.WaitEvent]), captions and errors;
//   - sends typed input ([Client.SendText]) and raw messages.
//
// [Client.Close] drops the connection (the session waits to be resumed,
// by a new Dial with [Options.ResumeToken]); [Client.Delete] ends the
// session.
//
// A test serves the server on a loopback listener and dials it:
//
//	srv, err := server.New(newAgent)
//	...
//	hs := httptest.NewServer(srv)
//	defer hs.Close()
//	c, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{})
//	...
//	defer c.Close()
//	greeting, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.PlayoutDone })
//
// The client offers loopback candidates only (127.0.0.1), so the server
// must be on the same machine; nothing it sends leaves it. The server's
// own transport can be kept on loopback too, with
// server.WithTransport(webrtc.NewTransport(webrtc.WithInterfaces("lo"))).
//
// The Opus codec is libopus through cgo (github.com/hraban/opus): building
// needs the Debian packages libopus-dev, libopusfile-dev and pkg-config.
package rtctest
