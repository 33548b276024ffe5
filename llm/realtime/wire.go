package realtime

import "encoding/json"

// Wire types of the Realtime API, as far as Holdline uses them. Server
// events are decoded into serverEvent, whose fields are the union of the
// events' fields; names of both the GA and the earlier beta protocol are
// accepted where they differ.

type serverEvent struct {
	Type           string          `json:"type"`
	EventID        string          `json:"event_id"`
	ResponseID     string          `json:"response_id"`
	ItemID         string          `json:"item_id"`
	PreviousItemID *string         `json:"previous_item_id"`
	CallID         string          `json:"call_id"`
	Name           string          `json:"name"`
	Arguments      string          `json:"arguments"`
	Delta          string          `json:"delta"`
	Transcript     string          `json:"transcript"`
	AudioEndMs     int             `json:"audio_end_ms"`
	Item           *wireItem       `json:"item"`
	Response       *wireResponse   `json:"response"`
	Error          *wireError      `json:"error"`
	Session        json.RawMessage `json:"session"`
}

type wireItem struct {
	ID        string        `json:"id,omitempty"`
	Type      string        `json:"type"`
	Status    string        `json:"status,omitempty"`
	Role      string        `json:"role,omitempty"`
	Content   []wireContent `json:"content,omitempty"`
	CallID    string        `json:"call_id,omitempty"`
	Name      string        `json:"name,omitempty"`
	Arguments string        `json:"arguments,omitempty"`
	Output    string        `json:"output,omitempty"`
}

type wireContent struct {
	Type       string `json:"type"`
	Text       string `json:"text,omitempty"`
	Transcript string `json:"transcript,omitempty"`
}

type wireResponse struct {
	ID            string          `json:"id"`
	Status        string          `json:"status"`
	StatusDetails json.RawMessage `json:"status_details,omitempty"`
	Output        []wireItem      `json:"output,omitempty"`
}

type wireError struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
	EventID string `json:"event_id"`
}

// clientEvent is any event the client sends; fields are omitted unless
// the event type uses them.
type clientEvent struct {
	Type           string         `json:"type"`
	EventID        string         `json:"event_id,omitempty"`
	Session        *wireSession   `json:"session,omitempty"`
	Item           *wireItem      `json:"item,omitempty"`
	PreviousItemID string         `json:"previous_item_id,omitempty"`
	ItemID         string         `json:"item_id,omitempty"`
	ContentIndex   *int           `json:"content_index,omitempty"`
	AudioEndMs     *int           `json:"audio_end_ms,omitempty"`
	Audio          string         `json:"audio,omitempty"`
	ResponseID     string         `json:"response_id,omitempty"`
	Response       *responseParam `json:"response,omitempty"`
}

type responseParam struct {
	Instructions string `json:"instructions,omitempty"`
}

type wireSession struct {
	Type             string     `json:"type"`
	Model            string     `json:"model,omitempty"`
	Instructions     string     `json:"instructions"`
	OutputModalities []string   `json:"output_modalities,omitempty"`
	Tools            []wireTool `json:"tools"`
	ToolChoice       string     `json:"tool_choice,omitempty"`
	Audio            *wireAudio `json:"audio,omitempty"`
}

type wireTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type wireAudio struct {
	Input  wireAudioInput  `json:"input"`
	Output wireAudioOutput `json:"output"`
}

type wireFormat struct {
	Type string `json:"type"`
	Rate int    `json:"rate,omitempty"`
}

type wireAudioInput struct {
	Format        wireFormat         `json:"format"`
	Transcription *wireTranscription `json:"transcription,omitempty"`
	// TurnDetection is null (JSON) when Holdline's own detector segments
	// the caller's speech.
	TurnDetection *wireTurnDetection `json:"turn_detection"`
}

type wireTranscription struct {
	Model    string `json:"model"`
	Language string `json:"language,omitempty"`
}

type wireTurnDetection struct {
	Type              string `json:"type"`
	CreateResponse    bool   `json:"create_response"`
	InterruptResponse bool   `json:"interrupt_response"`
}

type wireAudioOutput struct {
	Format wireFormat `json:"format"`
	Voice  string     `json:"voice,omitempty"`
}
