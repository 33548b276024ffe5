package openai

import (
	"encoding/json"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/holdline/holdline/llm"
)

// emptySchema is sent for a tool without parameters: the API rejects a
// null schema.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// messages maps a request onto chat messages: the instructions first as a
// system message, then the context in order. Consecutive tool calls become
// one assistant message, which also carries the text of an assistant
// message directly before them, as the model produced them in one turn.
//
// Messages with no text are left out (an assistant cut off before its first
// word, say): the API rejects a message without content.
func messages(req llm.Request) []goopenai.ChatCompletionMessage {
	var out []goopenai.ChatCompletionMessage
	if req.Instructions != "" {
		out = append(out, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleSystem, Content: req.Instructions})
	}
	// Whether the last message of out may still take tool calls: an
	// assistant message made from the item just before.
	open := false
	for _, it := range req.Context.Items {
		switch it.Kind {
		case llm.KindMessage:
			open = false
			if it.Text == "" {
				continue
			}
			out = append(out, goopenai.ChatCompletionMessage{Role: role(it.Role), Content: it.Text})
			open = it.Role == llm.RoleAssistant
		case llm.KindToolCall:
			if !open {
				out = append(out, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleAssistant})
				open = true
			}
			last := &out[len(out)-1]
			args := string(it.Arguments)
			if args == "" {
				args = "{}"
			}
			last.ToolCalls = append(last.ToolCalls, goopenai.ToolCall{
				ID:       it.CallID,
				Type:     goopenai.ToolTypeFunction,
				Function: goopenai.FunctionCall{Name: it.Name, Arguments: args},
			})
		case llm.KindToolResult:
			open = false
			out = append(out, goopenai.ChatCompletionMessage{
				Role:       goopenai.ChatMessageRoleTool,
				ToolCallID: it.CallID,
				Content:    it.Output,
			})
		}
	}
	return out
}

func role(r llm.Role) string {
	switch r {
	case llm.RoleSystem:
		return goopenai.ChatMessageRoleSystem
	case llm.RoleAssistant:
		return goopenai.ChatMessageRoleAssistant
	default:
		return goopenai.ChatMessageRoleUser
	}
}

func tools(specs []llm.ToolSpec) []goopenai.Tool {
	if len(specs) == 0 {
		return nil
	}
	out := make([]goopenai.Tool, len(specs))
	for i, s := range specs {
		params := s.Parameters
		if len(params) == 0 {
			params = emptySchema
		}
		out[i] = goopenai.Tool{
			Type: goopenai.ToolTypeFunction,
			Function: &goopenai.FunctionDefinition{
				Name:        s.Name,
				Description: s.Description,
				Parameters:  params,
			},
		}
	}
	return out
}
