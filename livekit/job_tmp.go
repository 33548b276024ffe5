package livekit

import lkproto "github.com/livekit/protocol/livekit"

// Job is one room a worker was given (placeholder until worker.go lands).
type Job struct {
	ID, Room, Token, URL, AgentName, Metadata, Participant string
	Raw                                                    *lkproto.Job
}
