package engine

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/holdline/holdline/llm"
)

// sameItem compares every field of llm.Item: each field changed on its own
// makes a different item. A field added to llm.Item and not compared fails
// here, rather than letting a changed item pass for one the model has seen.
func TestSameItemComparesEveryField(t *testing.T) {
	base := llm.Item{Kind: llm.KindToolCall, Arguments: json.RawMessage(`{}`)}
	if !sameItem(base, base) {
		t.Fatal("an item differs from itself")
	}
	typ := reflect.TypeFor[llm.Item]()
	for i := range typ.NumField() {
		other := base
		f := reflect.ValueOf(&other).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int64:
			f.SetInt(1)
		case reflect.Float64:
			f.SetFloat(0.5)
		case reflect.Slice:
			f.SetBytes([]byte(`{"a":1}`))
		default:
			t.Fatalf("llm.Item.%s is a %s: teach this test and sameItem about it", typ.Field(i).Name, f.Kind())
		}
		if sameItem(base, other) {
			t.Errorf("items differing in %s compare the same", typ.Field(i).Name)
		}
	}
}
