// Package server is Holdline's HTTP front door for browsers and other
// WebRTC clients: one handler that creates sessions from SDP offers,
// resumes them after a reload or a network change, streams their events,
// exports Prometheus metrics and serves the reference web client.
//
// Routes:
//
//	POST   /v1/sessions               SDP offer in, 201 + SDP answer out (a WHIP endpoint, RFC 9725);
//	                                  Location names the session, Holdline-Resume-Token resumes it
//	OPTIONS /v1/sessions              204, Accept-Post: application/sdp, CORS, ICE servers as Link headers (no token asked)
//	GET    /v1/sessions               the live calls on the host, of every transport (a WebRTC call with its network counts)
//	DELETE /v1/sessions/{id}          end the session (200)
//	PATCH  /v1/sessions/{id}          501: no trickle ICE; the answer has every candidate
//	OPTIONS /v1/sessions/{id}         204, CORS
//	GET    /v1/sessions/{id}/events   Server-Sent Events of the session (Last-Event-ID honoured)
//	POST   /v1/sessions/{id}/input    {"text": "..."}: typed input, like the data channel's
//	GET    /v1/sessions/{id}/context  the chat context
//	GET    /v1/config                 what the web client needs to know, ice_servers among it
//	GET    /metrics                   Prometheus (or on a listener of its own: WithSeparateMetrics)
//	GET    /healthz                   liveness
//	GET    /sessions/{id}             the session's live timeline (the page; its events come from the stream)
//	GET    /                          the reference web client
//
// With WithToken, the session routes and /metrics want "Authorization:
// Bearer <token>"; a missing token and a wrong one get different 401s.
// Only the event stream takes ?access_token=, as EventSource sends no
// headers. Typed input is bounded by MaxTextBytes on HTTP and on the data
// channel alike.
//
// The calls run on a calls.Host, made by New or shared with other
// transports (WithHost): the session routes reach every call on the host,
// a phone call answered by package sip as much as a browser's.
//
// A session outlives its connection. When the connection drops, the agent
// stops speaking (what the caller heard is what was played) and the
// session waits for a new offer carrying its resume token, up to the
// resume TTL; tools keep running and their results are there when the
// caller is back. The token rotates with every connection, so a token
// that resumed a session cannot be replayed.
//
// Through package webrtc the server codes Opus with libopus through cgo:
// building needs a C compiler and the Debian packages libopus-dev,
// libopusfile-dev and pkg-config.
package server
