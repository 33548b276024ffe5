package cli_test

import (
	"context"
	"io"
	"os"
	"strings"

	"github.com/holdline/holdline/cli"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
)

// Run is Main for tests: here the console of an agent of your own, with
// lines piped in as a script would. A main gives the same agents to
// cli.Main instead, and gets every command.
func ExampleRun() {
	echo := func(context.Context) (*runtime.Agent, func(), error) {
		model := scripted.NewLLMFunc(func(req llm.Request) scripted.Response {
			last := req.Context.Items[len(req.Context.Items)-1]
			return scripted.Response{Text: "You said: " + last.Text}
		})
		return &runtime.Agent{Name: "echo", Model: model}, nil, nil
	}
	err := cli.Run(context.Background(),
		[]string{"console", "--tts", "demo", "--words-per-second", "100"},
		map[string]runtime.AgentFunc{"echo": echo},
		cli.WithIO(strings.NewReader("hello\nhow are you\n"), os.Stdout, io.Discard))
	if err != nil {
		panic(err)
	}
	// Output:
	// user: hello
	// agent: You said: hello
	// user: how are you
	// agent: You said: how are you
}
