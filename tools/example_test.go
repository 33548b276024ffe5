package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/holdline/holdline/tools"
)

type orderArgs struct {
	OrderID string `json:"order_id" jsonschema:"the order number the caller read out"`
	Verbose bool   `json:"verbose,omitempty"`
}

type orderStatus struct {
	Status string `json:"status"`
	ETA    string `json:"eta"`
}

func Example() {
	lookup := tools.MustNew("lookup_order", "Look up an order's delivery status.",
		func(ctx context.Context, a orderArgs) (orderStatus, error) {
			return orderStatus{Status: "shipped", ETA: "Thursday"}, nil
		},
		tools.WithEffect(tools.Read),
		tools.WithTimeout(3*time.Second),
	)
	set, err := tools.NewSet(lookup)
	if err != nil {
		log.Fatal(err)
	}
	spec := set.Specs()[0]
	fmt.Println(spec.Name, string(spec.Parameters))

	// The model's call, as assembled from its stream.
	tool, _ := set.Lookup("lookup_order")
	out, err := tool.Run(context.Background(), json.RawMessage(`{"order_id":"A-1042"}`))
	fmt.Println(out, err)

	// A mistaken call: the error is meant to go back to the model.
	_, err = tool.Run(context.Background(), json.RawMessage(`{"order":1042}`))
	fmt.Println(errors.Is(err, tools.ErrInvalidArguments))
	fmt.Println(err)
	// Output:
	// lookup_order {"type":"object","properties":{"order_id":{"type":"string","description":"the order number the caller read out"},"verbose":{"type":"boolean"}},"required":["order_id"],"additionalProperties":false}
	// {"status":"shipped","eta":"Thursday"} <nil>
	// true
	// invalid arguments for tool "lookup_order": unknown field "order": the fields are "order_id", "verbose"; missing required field "order_id"
}
