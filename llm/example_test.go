package llm_test

import (
	"fmt"

	"github.com/holdline/holdline/llm"
)

func ExampleCallAccumulator() {
	// Two calls streamed interleaved, as chat-completion APIs do.
	deltas := []llm.ToolCallDelta{
		{Index: 1, ID: "call_b", Name: "get_time"},
		{Index: 0, ID: "call_a", Name: "get_weather", Arguments: `{"city":`},
		{Index: 0, Arguments: `"Paris"}`},
	}
	var acc llm.CallAccumulator
	for _, d := range deltas {
		acc.Add(d)
	}
	for _, c := range acc.Calls() {
		fmt.Println(c.ID, c.Name, string(c.Arguments))
	}
	// Output:
	// call_a get_weather {"city":"Paris"}
	// call_b get_time {}
}
