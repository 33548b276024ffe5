package engine

import "github.com/holdline/holdline/tts"

// DefaultApology is what an agent says when its model fails before saying
// anything, unless the agent has an apology of its own.
const DefaultApology = "Sorry, I ran into a problem on my side. Could you say that again?"

// AnswerText turns a model's streamed answer into the phrases its voice
// speaks, and decides what is said when the model fails: the live
// generation edge and the simulator both read a model's answer through
// it. It waits for nothing; the zero value cuts the first phrase as
// tts.Chunker does by default.
type AnswerText struct {
	chunker    tts.Chunker
	callsBegun bool
	said       bool
}

// NewAnswerText reads an answer whose first phrase may end early once it
// has firstPhraseWords words (tts.Chunker.MinFirstPhraseWords).
func NewAnswerText(firstPhraseWords int) AnswerText {
	return AnswerText{chunker: tts.Chunker{MinFirstPhraseWords: firstPhraseWords}}
}

// Text takes a delta of the answer's text and returns the phrases it
// completes.
func (a *AnswerText) Text(delta string) []string {
	if delta == "" {
		return nil
	}
	a.said = true
	return a.chunker.Push(delta)
}

// Spoke notes that the model said something other than text: a speaking
// model's audio or transcript.
func (a *AnswerText) Spoke() { a.said = true }

// ToolCall notes a tool call in the answer and returns the phrase it
// completes, if any: a call follows the answer's text, so what is left of
// the text is a whole phrase now, and the voice need not wait for the
// call's arguments to finish streaming.
func (a *AnswerText) ToolCall() string {
	a.said = true
	if a.callsBegun {
		return ""
	}
	a.callsBegun = true
	return a.chunker.Flush()
}

// End ends the answer, err being how the model's stream ended, and returns
// its last phrase, if any. A model that failed having said nothing leaves
// the apology to be spoken (DefaultApology if apology is empty), not
// silence; apologised says so, and the apology is the answer's text.
func (a *AnswerText) End(err error, apology string) (rest string, apologised bool) {
	rest = a.chunker.Flush()
	if err == nil || a.said || rest != "" {
		return rest, false
	}
	if apology == "" {
		apology = DefaultApology
	}
	return apology, true
}
